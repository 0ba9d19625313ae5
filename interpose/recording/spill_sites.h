// The live allocations the live table has no slot for, counted by site in the file's spill region
// (format::SpillSite): call stack, kind and device, with their count and bytes. The table keeps each
// of them in private memory, so that its free is matched and the totals stay exact; the file keeps
// what the report needs of them.
#pragma once

#include <cstdint>

#include "gpuleak/trace_format.h"
#include "recording/spin_lock.h"

namespace gpuleak {

class SpillSites {
  public:
    // Takes over `capacity` records (all zero) and the count of those committed; commits record 0.
    bool attach(format::SpillSite* records, uint64_t capacity, uint64_t* used);
    void detach();

    // Counts `allocation` in its site's record, adding the record when new; returns the record, 0 when
    // its site found none.
    uint32_t add(const format::LiveSlot& allocation);
    // Takes an allocation counted by add() out of `record`.
    void remove(uint32_t record, const format::LiveSlot& allocation);

  private:
    struct Key {
        uint32_t stack_id;
        int16_t device;
        uint8_t kind;
        bool operator==(const Key&) const = default;
    };
    uint32_t find_or_add(const Key& key);
    void change(format::SpillSite& site, uint64_t count, uint64_t bytes, bool add);

    format::SpillSite* records_ = nullptr;
    uint64_t capacity_ = 0;
    uint64_t* used_ = nullptr;
    uint32_t* index_ = nullptr; // open addressing: 0 empty, else record id
    uint64_t index_size_ = 0;   // power of two, at least twice the records
    SpinLock lock_;
};

} // namespace gpuleak
