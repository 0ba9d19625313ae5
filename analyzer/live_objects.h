// The objects live at one moment of the model's replay, by key space and address. The replay looks one
// up, adds or removes one at every ring event, tens of millions of times: open addressing with linear
// probing keeps that to a probe or two in one array, where a node-based map allocates at every insert.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "gpuleak/trace_format.h"

namespace gpuleak::analyzer {

struct LiveObject {
    uint64_t size = 0;
    format::MemoryKind kind = format::MemoryKind::None;
    int device = 0;
    uint32_t stack_id = 0;
};

class LiveObjects {
  public:
    explicit LiveObjects(size_t expected);

    // Stores `object` under the key, replacing what was there.
    void assign(format::KeySpace space, uint64_t address, const LiveObject& object);
    // Moves the key's object to `removed`; false, and `removed` untouched, when there is none.
    bool take(format::KeySpace space, uint64_t address, LiveObject& removed);

    // Visits every object, in an order that depends on the table: callers must not let it show.
    template <class Visit> void for_each(Visit&& visit) const {
        for (const Entry& entry : entries_)
            if (entry.used)
                visit(entry.object());
    }

  private:
    // LiveObject's fields unpacked: an entry takes 32 bytes, two to a cache line, and is written field
    // by field rather than copied whole from an object the caller has just built, which stalls on the
    // stores that built it at every event.
    struct Entry {
        uint64_t address = 0;
        uint64_t size = 0;
        int32_t device = 0;
        uint32_t stack_id = 0;
        format::MemoryKind kind = format::MemoryKind::None;
        format::KeySpace space = format::KeySpace::Pointer;
        bool used = false;

        [[nodiscard]] LiveObject object() const { return {size, kind, device, stack_id}; }
        void set(const LiveObject& object) {
            size = object.size;
            kind = object.kind;
            device = object.device;
            stack_id = object.stack_id;
        }
    };
    static_assert(sizeof(Entry) == 32);

    [[nodiscard]] size_t home(format::KeySpace space, uint64_t address) const;
    // The entry holding the key, or the empty one where it would go.
    [[nodiscard]] size_t find(format::KeySpace space, uint64_t address) const;
    void grow();

    std::vector<Entry> entries_; // a power of two of them, at most half used
    size_t used_ = 0;
};

} // namespace gpuleak::analyzer
