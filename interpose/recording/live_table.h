// The exact set of live allocations. The file's LiveSlot array is the record (a reader after a crash
// scans it up to the stripes' high-water marks); an in-process index finds an address's slot quickly.
// The table is split into stripes by address hash, each with its own lock, slots, free list, index
// and mark in the file, so threads allocating at once rarely meet on a lock. A stripe with no free slot
// left keeps a new allocation in private memory instead and counts it in the file by site
// (spill_sites.h): the set stays exact however many are live, as long as the process has memory.
#pragma once

#include <cstdint>

#include "gpuleak/trace_format.h"
#include "recording/spill_sites.h"
#include "recording/spin_lock.h"

namespace gpuleak {

class TraceWriter;

class LiveTable {
  public:
    static constexpr uint32_t kStripes = format::kLiveStripes;

    // Takes over `capacity` file slots (all free) and their stripes' marks (all 0). With `writer`, a
    // stripe's slots are reserved in its file a chunk at a time before they are used (otherwise they
    // are all usable). With `spill`, an object that finds no slot is kept in private memory and
    // counted there; without it, it is untracked.
    bool attach(format::LiveStripeMarks* marks, format::LiveSlot* slots, uint64_t capacity,
                TraceWriter* writer = nullptr, SpillSites* spill = nullptr);
    // Forgets the table in a forked child, whose parent's allocations are not its own.
    void detach_after_fork();

    struct InsertResult {
        // An object with the same key was live: it is copied to `replaced`, as its free went by unseen.
        bool replaced = false;
        // There was no memory to keep it in: the object is not in the table.
        bool untracked = false;
    };
    // The event numbers an insert claims from a counter: the free of the object it replaced, if any,
    // then the new object's allocation, which its slot records.
    struct Sequences {
        uint64_t replaced_free = 0;
        uint64_t alloc = 0;
    };
    // Adds `entry` (state is set here). With `sequence_counter`, the event numbers are claimed from it
    // under the stripe's lock, so that the replaced object's free is numbered before the new
    // allocation, and the allocation before any free of it (a free is numbered after remove()
    // returned); without it, the slot keeps entry.sequence.
    InsertResult insert(const format::LiveSlot& entry, format::LiveSlot* replaced,
                        uint64_t* sequence_counter = nullptr, Sequences* sequences = nullptr);
    // Removes the object at `address` in `space`, copying it to `removed`; false when not live.
    bool remove(format::KeySpace space, uint64_t address, format::LiveSlot* removed);
    // Removes the live object of `space` with the lowest address in [low, high), if any.
    bool remove_first_in(format::KeySpace space, uint64_t low, uint64_t high, format::LiveSlot* removed);
    bool find(format::KeySpace space, uint64_t address, format::LiveSlot* found);
    [[nodiscard]] uint64_t live_count() const;
    // Of live_count(), those kept in private memory.
    [[nodiscard]] uint64_t spilled_count() const;

  private:
    struct Stripe {
        SpinLock lock;
        uint32_t first_slot = 0;
        uint32_t slot_count = 0;
        uint32_t used = 0;     // *mark, kept here so that an insert reads no shared cache line
        uint32_t reserved = 0; // slots from the first whose blocks in the file are reserved
        bool reserve_failed = false;
        uint32_t free_count = 0;
        uint32_t* free_slots = nullptr; // stack of freed file slot indices
        uint32_t* index = nullptr;      // open addressing: 0 empty, kTombstone, else reference + 1
        uint32_t index_size = 0;        // power of two
        uint32_t index_used = 0;        // live + tombstones
        uint32_t live = 0;
        // Objects without a file slot: an array grown as needed, its free entries chained through
        // their address field.
        format::LiveSlot* spilled = nullptr;
        uint32_t spilled_capacity = 0;
        uint32_t spilled_used = 0; // entries ever handed out
        uint32_t spilled_free = kNoEntry;
        uint32_t spilled_live = 0;
        uint64_t* mark = nullptr; // the stripe's high-water mark in the file
    };
    static constexpr uint32_t kTombstone = UINT32_MAX;
    static constexpr uint32_t kNoEntry = UINT32_MAX;
    // Index references at or above this name entries of the stripe's spilled array; below it, file slots.
    static constexpr uint32_t kSpilledReference = 1u << 31;

    static void forget(Stripe& stripe);
    void forget_table();
    // Unmaps what attach() mapped, and forgets the table.
    void release();
    Stripe& stripe_for(format::KeySpace space, uint64_t address);
    format::LiveSlot& object_of(Stripe& stripe, uint32_t index_entry) const;
    uint32_t* probe(Stripe& stripe, format::KeySpace space, uint64_t address,
                    uint32_t** first_tombstone = nullptr);
    bool make_room_in_index(Stripe& stripe);
    // A place for a new object: a free or new file slot, else a spilled entry; kNoEntry when none.
    uint32_t take_place(Stripe& stripe);
    bool reserve_more(Stripe& stripe);
    uint32_t take_spilled_entry(Stripe& stripe);
    void take_out(Stripe& stripe, uint32_t* index_entry, format::LiveSlot* removed);
    // Runs action(stripe, index entry) under the stripe's lock when the key is live.
    template <typename Action> bool with_entry(format::KeySpace space, uint64_t address, Action&& action);

    // Set by attach() before any thread records, cleared by a child after fork: read without a lock,
    // where a stripe's index may move under another thread's.
    bool attached_ = false;
    format::LiveSlot* slots_ = nullptr;
    TraceWriter* writer_ = nullptr;
    SpillSites* spill_ = nullptr;
    Stripe stripes_[kStripes];
    uint32_t* free_slot_memory_ = nullptr;
    uint64_t free_slot_bytes_ = 0;
};

} // namespace gpuleak
