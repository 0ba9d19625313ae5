#include "recording/live_table.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <sys/mman.h>

#include "recording/trace_writer.h"

namespace gpuleak {

using format::KeySpace;
using format::LiveSlot;

namespace {

// Slots reserved in the file at a time, per stripe: a reservation is a system call, made under the
// stripe's lock, once per this many new slots.
constexpr uint32_t kReserveChunk = 1024;
// Index entries a stripe starts with: one page.
constexpr uint32_t kFirstIndexSize = 1024;
constexpr uint32_t kFirstSpilledCapacity = 1024;

uint64_t key_hash(KeySpace space, uint64_t address) {
    uint64_t x = address ^ (static_cast<uint64_t>(space) << 59);
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ull;
    x ^= x >> 33;
    return x;
}

bool same_key(const LiveSlot& slot, KeySpace space, uint64_t address) {
    return slot.address == address &&
           format::key_space_of(static_cast<format::MemoryKind>(slot.kind)) == space;
}

// A stripe's counts change under its lock and are read without it (live_count()): atomic stores, but
// no locked instruction, as only the lock's holder writes them.
void count_up(uint32_t& count) {
    __atomic_store_n(&count, count + 1, __ATOMIC_RELAXED);
}
void count_down(uint32_t& count) {
    __atomic_store_n(&count, count - 1, __ATOMIC_RELAXED);
}

void* map_private(uint64_t bytes) {
    void* memory = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    return memory == MAP_FAILED ? nullptr : memory;
}

} // namespace

bool LiveTable::attach(format::LiveStripeMarks* marks, LiveSlot* slots, uint64_t capacity,
                       TraceWriter* writer, SpillSites* spill) {
    // Slot indices are 32-bit here, below kSpilledReference, and the stripes must be the file's, so a
    // larger table cannot be cut down: compute_layout never makes one.
    if (capacity > UINT32_MAX / 4)
        return false;
    // The free lists are reserved whole and touched only as far as frees reach.
    free_slot_bytes_ = std::max<uint64_t>(capacity, 1) * sizeof(uint32_t);
    free_slot_memory_ = static_cast<uint32_t*>(map_private(free_slot_bytes_));
    if (free_slot_memory_ == nullptr)
        return false;
    slots_ = slots;
    writer_ = writer;
    spill_ = spill;
    attached_ = true;
    for (uint32_t i = 0; i < kStripes; ++i) {
        Stripe& stripe = stripes_[i];
        forget(stripe);
        stripe.first_slot = static_cast<uint32_t>(format::live_stripe_start(capacity, i));
        stripe.slot_count =
            static_cast<uint32_t>(format::live_stripe_start(capacity, i + 1)) - stripe.first_slot;
        stripe.reserved = writer == nullptr ? stripe.slot_count : 0;
        stripe.free_slots = free_slot_memory_ + stripe.first_slot;
        stripe.index = static_cast<uint32_t*>(map_private(kFirstIndexSize * sizeof(uint32_t)));
        if (stripe.index == nullptr) {
            release();
            return false;
        }
        stripe.index_size = kFirstIndexSize;
        stripe.mark = &marks->used[i];
    }
    return true;
}

void LiveTable::release() {
    for (Stripe& stripe : stripes_) {
        if (stripe.index != nullptr)
            ::munmap(stripe.index, uint64_t{stripe.index_size} * sizeof(uint32_t));
        if (stripe.spilled != nullptr)
            ::munmap(stripe.spilled, uint64_t{stripe.spilled_capacity} * sizeof(LiveSlot));
        forget(stripe);
    }
    if (free_slot_memory_ != nullptr)
        ::munmap(free_slot_memory_, free_slot_bytes_);
    forget_table();
}

void LiveTable::detach_after_fork() {
    // A thread of the parent may have been moving an index or a spilled array when it forked, so that
    // what the stripe names is not what is mapped: the child leaves it all mapped, untouched (shared
    // with the parent until written), rather than unmap what may be another's memory now.
    for (Stripe& stripe : stripes_)
        forget(stripe);
    forget_table();
}

void LiveTable::forget_table() {
    attached_ = false;
    free_slot_memory_ = nullptr;
    slots_ = nullptr;
    writer_ = nullptr;
    spill_ = nullptr;
}

// Empty, owning no memory: what attach() fills in, and release() and detach_after_fork() leave. The
// lock is reset: in a forked child, a thread of the parent may have held it.
void LiveTable::forget(Stripe& stripe) {
    stripe.lock.reset_after_fork();
    stripe.first_slot = 0;
    stripe.slot_count = 0;
    stripe.used = 0;
    stripe.reserved = 0;
    stripe.reserve_failed = false;
    stripe.free_count = 0;
    stripe.free_slots = nullptr;
    stripe.index = nullptr;
    stripe.index_size = 0;
    stripe.index_used = 0;
    stripe.live = 0;
    stripe.spilled = nullptr;
    stripe.spilled_capacity = 0;
    stripe.spilled_used = 0;
    stripe.spilled_free = kNoEntry;
    stripe.spilled_live = 0;
    stripe.mark = nullptr;
}

LiveTable::Stripe& LiveTable::stripe_for(KeySpace space, uint64_t address) {
    return stripes_[key_hash(space, address) % kStripes];
}

LiveSlot& LiveTable::object_of(Stripe& stripe, uint32_t index_entry) const {
    const uint32_t reference = index_entry - 1;
    return reference >= kSpilledReference ? stripe.spilled[reference - kSpilledReference] : slots_[reference];
}

// Returns the index entry holding the key, or the empty entry where the probe ended. With
// `first_tombstone`, also the first tombstone passed on the way (nullptr if none): where an insert of
// a key that is not there goes, so that freeing and allocating the same address again and again
// does not grow a run of tombstones that every probe of it walks.
uint32_t* LiveTable::probe(Stripe& stripe, KeySpace space, uint64_t address, uint32_t** first_tombstone) {
    uint32_t mask = stripe.index_size - 1;
    uint32_t position = static_cast<uint32_t>(key_hash(space, address) >> 32) & mask;
    if (first_tombstone != nullptr)
        *first_tombstone = nullptr;
    for (uint32_t step = 0; step < stripe.index_size; ++step) {
        uint32_t* entry = &stripe.index[(position + step) & mask];
        if (*entry == 0)
            return entry;
        if (*entry == kTombstone) {
            if (first_tombstone != nullptr && *first_tombstone == nullptr)
                *first_tombstone = entry;
        } else if (same_key(object_of(stripe, *entry), space, address)) {
            return entry;
        }
    }
    return nullptr;
}

// Tombstones make probes long: past 3/4 occupancy the index is rebuilt without them, twice as large as
// its live entries need, so that a probe always ends on an empty entry. False when there was no memory
// for it and the index is too full to take another entry.
bool LiveTable::make_room_in_index(Stripe& stripe) {
    if ((uint64_t{stripe.index_used} + 1) * 4 <= uint64_t{stripe.index_size} * 3)
        return true;
    uint64_t wanted = kFirstIndexSize;
    while (wanted < (uint64_t{stripe.live} + 1) * 4)
        wanted *= 2;
    // Index entries are 32-bit: a stripe past 2^30 live objects takes no more.
    if (wanted > uint64_t{1} << 31)
        return stripe.index_used < stripe.index_size - 1;
    const uint32_t size = std::max(static_cast<uint32_t>(wanted), stripe.index_size);
    auto* index = static_cast<uint32_t*>(map_private(uint64_t{size} * sizeof(uint32_t)));
    if (index == nullptr)
        return stripe.index_used < stripe.index_size - 1;
    const uint32_t mask = size - 1;
    for (uint32_t i = 0; i < stripe.index_size; ++i) {
        const uint32_t entry = stripe.index[i];
        if (entry == 0 || entry == kTombstone)
            continue;
        const LiveSlot& object = object_of(stripe, entry);
        const auto space = format::key_space_of(static_cast<format::MemoryKind>(object.kind));
        uint32_t position = static_cast<uint32_t>(key_hash(space, object.address) >> 32) & mask;
        while (index[position] != 0)
            position = (position + 1) & mask;
        index[position] = entry;
    }
    ::munmap(stripe.index, uint64_t{stripe.index_size} * sizeof(uint32_t));
    stripe.index = index;
    stripe.index_size = size;
    stripe.index_used = stripe.live;
    return true;
}

bool LiveTable::reserve_more(Stripe& stripe) {
    if (stripe.reserve_failed || stripe.reserved >= stripe.slot_count)
        return false;
    const uint32_t count = std::min(kReserveChunk, stripe.slot_count - stripe.reserved);
    // A full disk leaves the rest of the stripe unused: its allocations are kept in private memory. A
    // failure that may pass (no descriptor free just now) is tried again at the next new slot.
    const int error = writer_->reserve_live_slots(uint64_t{stripe.first_slot} + stripe.reserved, count);
    if (error != 0) {
        stripe.reserve_failed = error != EMFILE && error != ENFILE && error != ENOMEM && error != EAGAIN;
        return false;
    }
    stripe.reserved += count;
    return true;
}

uint32_t LiveTable::take_spilled_entry(Stripe& stripe) {
    if (stripe.spilled_free != kNoEntry) {
        const uint32_t entry = stripe.spilled_free;
        stripe.spilled_free = static_cast<uint32_t>(stripe.spilled[entry].address);
        return entry;
    }
    if (stripe.spilled_used == stripe.spilled_capacity) {
        const uint64_t capacity =
            stripe.spilled_capacity == 0 ? kFirstSpilledCapacity : uint64_t{stripe.spilled_capacity} * 2;
        if (capacity >= kSpilledReference - 1)
            return kNoEntry;
        void* memory = stripe.spilled == nullptr
                           ? map_private(capacity * sizeof(LiveSlot))
                           : ::mremap(stripe.spilled, uint64_t{stripe.spilled_capacity} * sizeof(LiveSlot),
                                      capacity * sizeof(LiveSlot), MREMAP_MAYMOVE);
        if (memory == nullptr || memory == MAP_FAILED)
            return kNoEntry;
        stripe.spilled = static_cast<LiveSlot*>(memory);
        stripe.spilled_capacity = static_cast<uint32_t>(capacity);
    }
    return stripe.spilled_used++;
}

uint32_t LiveTable::take_place(Stripe& stripe) {
    if (stripe.free_count > 0)
        return stripe.free_slots[--stripe.free_count];
    if (stripe.used < stripe.slot_count && (stripe.used < stripe.reserved || reserve_more(stripe))) {
        ++stripe.used;
        // The release store of the state that follows keeps this store before it: whenever a reader
        // (also after a SIGKILL between the two) sees the slot live, the mark covers it.
        __atomic_store_n(stripe.mark, stripe.used, __ATOMIC_RELAXED);
        return stripe.first_slot + stripe.used - 1;
    }
    // Kept in private memory only where the file counts it: otherwise the trace would not know of it.
    const uint32_t entry = spill_ == nullptr ? kNoEntry : take_spilled_entry(stripe);
    return entry == kNoEntry ? kNoEntry : kSpilledReference + entry;
}

void LiveTable::take_out(Stripe& stripe, uint32_t* index_entry, LiveSlot* removed) {
    const uint32_t reference = *index_entry - 1;
    LiveSlot& object = object_of(stripe, *index_entry);
    if (removed != nullptr) {
        *removed = object;
        removed->state = format::kSlotLive;
    }
    if (reference >= kSpilledReference) {
        // Its state names the spill record that counts it.
        spill_->remove(object.state, object);
        object.address = stripe.spilled_free;
        stripe.spilled_free = reference - kSpilledReference;
        count_down(stripe.spilled_live);
    } else {
        __atomic_store_n(&object.state, format::kSlotFree, __ATOMIC_RELEASE);
        stripe.free_slots[stripe.free_count++] = reference;
    }
    *index_entry = kTombstone;
    count_down(stripe.live);
}

LiveTable::InsertResult LiveTable::insert(const LiveSlot& entry, LiveSlot* replaced,
                                          uint64_t* sequence_counter, Sequences* sequences) {
    InsertResult result;
    uint64_t sequence = entry.sequence;
    const auto claim = [&] {
        if (sequence_counter != nullptr)
            sequence = sequences->alloc = __atomic_fetch_add(sequence_counter, 1, __ATOMIC_RELAXED);
    };
    if (!attached_) {
        claim();
        result.untracked = true;
        return result;
    }
    auto space = format::key_space_of(static_cast<format::MemoryKind>(entry.kind));
    Stripe& stripe = stripe_for(space, entry.address);
    SpinGuard guard(stripe.lock);
    const bool index_has_room = make_room_in_index(stripe);
    uint32_t* tombstone = nullptr;
    uint32_t* position = probe(stripe, space, entry.address, &tombstone);
    if (position != nullptr && *position != 0) {
        take_out(stripe, position, replaced);
        result.replaced = true;
        if (sequence_counter != nullptr)
            sequences->replaced_free = __atomic_fetch_add(sequence_counter, 1, __ATOMIC_RELAXED);
    } else if (tombstone != nullptr) {
        // The key is not in the index: its first tombstone takes it (index_used does not change).
        position = tombstone;
    } else if (!index_has_room) {
        position = nullptr;
    }
    claim();
    const uint32_t place = position == nullptr ? kNoEntry : take_place(stripe);
    if (place == kNoEntry) {
        result.untracked = true;
        return result;
    }
    if (place >= kSpilledReference) {
        LiveSlot& object = stripe.spilled[place - kSpilledReference];
        object = entry;
        object.sequence = sequence;
        object.state = spill_->add(object);
        count_up(stripe.spilled_live);
    } else {
        LiveSlot& slot = slots_[place];
        std::memcpy(reinterpret_cast<uint8_t*>(&slot) + sizeof slot.state,
                    reinterpret_cast<const uint8_t*>(&entry) + sizeof entry.state,
                    sizeof entry - sizeof entry.state);
        slot.sequence = sequence;
        __atomic_store_n(&slot.state, format::kSlotLive, __ATOMIC_RELEASE);
    }
    if (*position == 0)
        ++stripe.index_used;
    *position = place + 1;
    count_up(stripe.live);
    return result;
}

template <typename Action> bool LiveTable::with_entry(KeySpace space, uint64_t address, Action&& action) {
    if (!attached_)
        return false;
    Stripe& stripe = stripe_for(space, address);
    SpinGuard guard(stripe.lock);
    uint32_t* entry = probe(stripe, space, address);
    if (entry == nullptr || *entry == 0)
        return false;
    action(stripe, entry);
    return true;
}

bool LiveTable::remove(KeySpace space, uint64_t address, LiveSlot* removed) {
    return with_entry(space, address,
                      [&](Stripe& stripe, uint32_t* entry) { take_out(stripe, entry, removed); });
}

bool LiveTable::remove_first_in(KeySpace space, uint64_t low, uint64_t high, LiveSlot* removed) {
    if (!attached_ || low >= high)
        return false;
    const auto candidate = [&](const LiveSlot& object) {
        return object.address >= low && object.address < high &&
               format::key_space_of(static_cast<format::MemoryKind>(object.kind)) == space;
    };
    // Ranges span stripes, so this scans the slots: only VMM unmaps of several mappings at once get here.
    for (;;) {
        uint64_t best_address = UINT64_MAX;
        for (Stripe& stripe : stripes_) {
            // The file's mark, as `used` belongs to the stripe's lock. An object made before this call
            // lies below it; one made during the scan may be missed, as it always could be.
            const uint64_t used = __atomic_load_n(stripe.mark, __ATOMIC_ACQUIRE);
            for (uint32_t s = stripe.first_slot; s < stripe.first_slot + used; ++s) {
                const LiveSlot& slot = slots_[s];
                if (__atomic_load_n(&slot.state, __ATOMIC_ACQUIRE) == format::kSlotLive && candidate(slot))
                    best_address = std::min(best_address, slot.address);
            }
            if (__atomic_load_n(&stripe.spilled_live, __ATOMIC_RELAXED) == 0)
                continue;
            // The spilled array moves as it grows: read it under the lock, through the index.
            SpinGuard guard(stripe.lock);
            for (uint32_t i = 0; i < stripe.index_size; ++i) {
                const uint32_t entry = stripe.index[i];
                if (entry != 0 && entry != kTombstone && entry - 1 >= kSpilledReference &&
                    candidate(object_of(stripe, entry)))
                    best_address = std::min(best_address, object_of(stripe, entry).address);
            }
        }
        if (best_address == UINT64_MAX)
            return false;
        // Another thread may have freed it between the scan and the removal: look again.
        if (remove(space, best_address, removed))
            return true;
    }
}

bool LiveTable::find(KeySpace space, uint64_t address, LiveSlot* found) {
    return with_entry(space, address, [&](Stripe& stripe, uint32_t* entry) {
        *found = object_of(stripe, *entry);
        found->state = format::kSlotLive;
    });
}

uint64_t LiveTable::live_count() const {
    uint64_t total = 0;
    for (const Stripe& stripe : stripes_)
        total += __atomic_load_n(&stripe.live, __ATOMIC_RELAXED);
    return total;
}

uint64_t LiveTable::spilled_count() const {
    uint64_t total = 0;
    for (const Stripe& stripe : stripes_)
        total += __atomic_load_n(&stripe.spilled_live, __ATOMIC_RELAXED);
    return total;
}

} // namespace gpuleak
