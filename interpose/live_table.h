// The exact set of live allocations. The file's LiveSlot array is the record (a reader after a crash
// scans it up to the stripes' high-water marks); an in-process index finds an address's slot quickly.
// The table is split into stripes by address hash, each with its own lock, slots, free list, index
// and mark in the file, so threads allocating at once rarely meet on a lock.
#pragma once

#include <cstdint>

#include "gpuleak/trace_format.h"
#include "spin_lock.h"

namespace gpuleak {

class LiveTable {
  public:
    static constexpr uint32_t kStripes = format::kLiveStripes;

    // Takes over `capacity` file slots (all free) and their stripes' marks (all 0). Private memory for
    // the index is mapped here.
    bool attach(format::LiveStripeMarks* marks, format::LiveSlot* slots, uint64_t capacity);
    // Drops the index (used in a forked child, whose parent's allocations are not its own).
    void detach();

    enum class InsertResult { Inserted, Replaced, Full };
    // The event numbers an insert claims from a counter: the free of the object it replaced, if any,
    // then the new object's allocation, which its slot records.
    struct Sequences {
        uint64_t replaced_free = 0;
        uint64_t alloc = 0;
    };
    // Adds `entry` (state is set here). When an object with the same key is already live it is
    // replaced and copied to `replaced`: its free went by unseen. With `sequence_counter`, the event
    // numbers are claimed from it under the stripe's lock, so that the replaced object's free is
    // numbered before the new allocation, and the allocation before any free of it (a free is numbered
    // after remove() returned); without it, the slot keeps entry.sequence.
    InsertResult insert(const format::LiveSlot& entry, format::LiveSlot* replaced,
                        uint64_t* sequence_counter = nullptr, Sequences* sequences = nullptr);
    // Removes the object at `address` in `space`, copying it to `removed`; false when not live.
    bool remove(format::KeySpace space, uint64_t address, format::LiveSlot* removed);
    // Removes the live object of `space` with the lowest address in [low, high), if any.
    bool remove_first_in(format::KeySpace space, uint64_t low, uint64_t high, format::LiveSlot* removed);
    bool find(format::KeySpace space, uint64_t address, format::LiveSlot* found);
    [[nodiscard]] uint64_t live_count() const;

  private:
    struct Stripe {
        SpinLock lock;
        uint32_t first_slot = 0;
        uint32_t slot_count = 0;
        uint32_t free_count = 0;
        uint32_t* free_slots = nullptr; // stack of free slot indices
        uint32_t* index = nullptr;      // open addressing: 0 empty, kTombstone, else slot index + 1
        uint32_t index_size = 0;        // power of two
        uint32_t index_used = 0;        // live + tombstones
        uint32_t live = 0;
        uint32_t used = 0;        // *mark, kept here so that an insert reads no shared cache line
        uint64_t* mark = nullptr; // the stripe's high-water mark in the file
    };
    static constexpr uint32_t kTombstone = UINT32_MAX;

    Stripe& stripe_for(format::KeySpace space, uint64_t address);
    uint32_t* probe(Stripe& stripe, format::KeySpace space, uint64_t address,
                    uint32_t** first_tombstone = nullptr);
    void rebuild_index(Stripe& stripe);
    void take_out(Stripe& stripe, uint32_t* index_entry, format::LiveSlot* removed);
    // Runs action(stripe, index entry) under the stripe's lock when the key is live.
    template <typename Action> bool with_entry(format::KeySpace space, uint64_t address, Action&& action);

    format::LiveSlot* slots_ = nullptr;
    Stripe stripes_[kStripes];
    void* private_memory_ = nullptr;
    uint64_t private_bytes_ = 0;
};

} // namespace gpuleak
