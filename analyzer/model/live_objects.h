// The objects live at one moment of the model's replay, by key space and address. The replay looks one
// up, adds or removes one at every ring event, tens of millions of times: open addressing with linear
// probing keeps that to a probe or two in one array, where a node-based map allocates at every insert.
// The hot paths are inline, and each entry keeps its home slot, so that a removal's backward shift does
// not hash again every entry it moves past.
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
    void assign(format::KeySpace space, uint64_t address, const LiveObject& object) {
        const size_t home = home_of(space, address);
        Entry& entry = entries_[find(home, space, address)];
        if (entry.used) {
            entry.set(object);
            return;
        }
        if ((used_ + 1) * 2 > entries_.size()) {
            grow();
            assign(space, address, object);
            return;
        }
        entry.address = address;
        entry.home = static_cast<uint32_t>(home);
        entry.space = space;
        entry.used = true;
        entry.set(object);
        ++used_;
    }

    // Moves the key's object to `removed`; false, and `removed` untouched, when there is none.
    bool take(format::KeySpace space, uint64_t address, LiveObject& removed) {
        const size_t mask = entries_.size() - 1;
        size_t hole = find(home_of(space, address), space, address);
        if (!entries_[hole].used)
            return false;
        removed = entries_[hole].object();
        // Backward-shift deletion: an entry further along the run moves into the hole unless its home
        // lies cyclically after the hole, so that every entry stays reachable from its home without
        // tombstones.
        for (size_t next = (hole + 1) & mask; entries_[next].used; next = (next + 1) & mask) {
            if (((next - entries_[next].home) & mask) >= ((next - hole) & mask)) {
                entries_[hole] = entries_[next];
                hole = next;
            }
        }
        entries_[hole].used = false;
        --used_;
        return true;
    }

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
        uint32_t home = 0; // where the key's search starts: the table holds fewer than 2^32 entries
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

    [[nodiscard]] size_t home_of(format::KeySpace space, uint64_t address) const {
        // Addresses share their low bits (alignment) and high bits (one mapping): mix them all in.
        uint64_t x = address ^ (uint64_t{static_cast<uint8_t>(space)} << 56);
        x ^= x >> 33;
        x *= 0xff51afd7ed558ccdull;
        x ^= x >> 33;
        return static_cast<size_t>(x) & (entries_.size() - 1);
    }
    // The entry holding the key, or the empty one where it would go.
    [[nodiscard]] size_t find(size_t home, format::KeySpace space, uint64_t address) const {
        const size_t mask = entries_.size() - 1;
        size_t i = home;
        while (entries_[i].used && (entries_[i].address != address || entries_[i].space != space))
            i = (i + 1) & mask;
        return i;
    }
    void grow();

    std::vector<Entry> entries_; // a power of two of them, at most half used
    size_t used_ = 0;
};

} // namespace gpuleak::analyzer
