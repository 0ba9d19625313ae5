#include "live_table.h"

#include <cstring>
#include <sys/mman.h>

namespace gpuleak {

using format::KeySpace;
using format::LiveSlot;

namespace {

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

uint32_t index_size_for(uint32_t slots) {
    uint32_t size = 16;
    while (size < slots * 2)
        size *= 2;
    return size;
}

} // namespace

bool LiveTable::attach(format::LiveStripeMarks* marks, LiveSlot* slots, uint64_t capacity) {
    // Slot indices are 32-bit here, and the stripes must be the file's, so a larger table cannot be
    // cut down: compute_layout never makes one (GPULEAK_MAX_MB's limit gives under 2^29 slots).
    if (capacity > UINT32_MAX / 4)
        return false;
    uint64_t words = 0;
    for (uint32_t i = 0; i < kStripes; ++i) {
        uint64_t count = format::live_stripe_start(capacity, i + 1) - format::live_stripe_start(capacity, i);
        words += count + index_size_for(static_cast<uint32_t>(count));
    }
    private_bytes_ = words * sizeof(uint32_t);
    void* memory =
        ::mmap(nullptr, private_bytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (memory == MAP_FAILED) {
        private_memory_ = nullptr;
        return false;
    }
    private_memory_ = memory;
    slots_ = slots;
    auto* cursor = static_cast<uint32_t*>(memory);
    for (uint32_t i = 0; i < kStripes; ++i) {
        Stripe& stripe = stripes_[i];
        stripe.lock.reset_after_fork();
        stripe.first_slot = static_cast<uint32_t>(format::live_stripe_start(capacity, i));
        stripe.slot_count =
            static_cast<uint32_t>(format::live_stripe_start(capacity, i + 1)) - stripe.first_slot;
        stripe.free_slots = cursor;
        cursor += stripe.slot_count;
        // Popping from the end hands out the stripe's slots lowest first.
        for (uint32_t s = 0; s < stripe.slot_count; ++s)
            stripe.free_slots[s] = stripe.first_slot + stripe.slot_count - 1 - s;
        stripe.free_count = stripe.slot_count;
        stripe.index_size = index_size_for(stripe.slot_count);
        stripe.index = cursor;
        cursor += stripe.index_size;
        stripe.index_used = 0;
        stripe.live = 0;
        stripe.used = 0;
        stripe.mark = &marks->used[i];
    }
    return true;
}

void LiveTable::detach() {
    if (private_memory_ != nullptr)
        ::munmap(private_memory_, private_bytes_);
    private_memory_ = nullptr;
    slots_ = nullptr;
    for (Stripe& stripe : stripes_) {
        stripe.lock.reset_after_fork();
        stripe.slot_count = 0;
        stripe.free_count = 0;
        stripe.index_size = 0;
        stripe.index_used = 0;
        stripe.live = 0;
        stripe.used = 0;
        stripe.mark = nullptr;
    }
}

LiveTable::Stripe& LiveTable::stripe_for(KeySpace space, uint64_t address) {
    return stripes_[key_hash(space, address) % kStripes];
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
        } else if (same_key(slots_[*entry - 1], space, address)) {
            return entry;
        }
    }
    return nullptr;
}

void LiveTable::rebuild_index(Stripe& stripe) {
    std::memset(stripe.index, 0, stripe.index_size * sizeof(uint32_t));
    stripe.index_used = 0;
    uint32_t mask = stripe.index_size - 1;
    for (uint32_t s = stripe.first_slot; s < stripe.first_slot + stripe.used; ++s) {
        const LiveSlot& slot = slots_[s];
        if (slot.state != format::kSlotLive)
            continue;
        auto space = format::key_space_of(static_cast<format::MemoryKind>(slot.kind));
        uint32_t position = static_cast<uint32_t>(key_hash(space, slot.address) >> 32) & mask;
        while (stripe.index[position] != 0)
            position = (position + 1) & mask;
        stripe.index[position] = s + 1;
        ++stripe.index_used;
    }
}

void LiveTable::take_out(Stripe& stripe, uint32_t* index_entry, LiveSlot* removed) {
    uint32_t slot_index = *index_entry - 1;
    LiveSlot& slot = slots_[slot_index];
    if (removed != nullptr)
        *removed = slot;
    __atomic_store_n(&slot.state, format::kSlotFree, __ATOMIC_RELEASE);
    *index_entry = kTombstone;
    stripe.free_slots[stripe.free_count++] = slot_index;
    --stripe.live;
}

LiveTable::InsertResult LiveTable::insert(const LiveSlot& entry, LiveSlot* replaced,
                                          uint64_t* sequence_counter, Sequences* sequences) {
    uint64_t sequence = entry.sequence;
    const auto claim = [&] {
        if (sequence_counter != nullptr)
            sequence = sequences->alloc = __atomic_fetch_add(sequence_counter, 1, __ATOMIC_RELAXED);
    };
    if (slots_ == nullptr) {
        claim();
        return InsertResult::Full;
    }
    auto space = format::key_space_of(static_cast<format::MemoryKind>(entry.kind));
    Stripe& stripe = stripe_for(space, entry.address);
    SpinGuard guard(stripe.lock);
    // Tombstones make probes long; past 3/4 occupancy the index is rebuilt from the file slots,
    // which are the truth. The index has twice as many entries as the stripe has slots, so after a
    // rebuild a probe always ends on an empty entry.
    if ((stripe.index_used + 1) * 4 > stripe.index_size * 3)
        rebuild_index(stripe);
    InsertResult result = InsertResult::Inserted;
    uint32_t* tombstone = nullptr;
    uint32_t* position = probe(stripe, space, entry.address, &tombstone);
    if (position != nullptr && *position != 0) {
        take_out(stripe, position, replaced);
        result = InsertResult::Replaced;
        if (sequence_counter != nullptr)
            sequences->replaced_free = __atomic_fetch_add(sequence_counter, 1, __ATOMIC_RELAXED);
    } else if (tombstone != nullptr) {
        // The key is not in the index: its first tombstone takes it (index_used does not change).
        position = tombstone;
    }
    claim();
    if (position == nullptr || stripe.free_count == 0)
        return InsertResult::Full;
    uint32_t slot_index = stripe.free_slots[--stripe.free_count];
    if (slot_index - stripe.first_slot >= stripe.used) {
        stripe.used = slot_index - stripe.first_slot + 1;
        // The release store of the state below keeps this store before it: whenever a reader (also
        // after a SIGKILL between the two) sees the slot live, the mark covers it.
        __atomic_store_n(stripe.mark, stripe.used, __ATOMIC_RELAXED);
    }
    LiveSlot& slot = slots_[slot_index];
    std::memcpy(reinterpret_cast<uint8_t*>(&slot) + sizeof slot.state,
                reinterpret_cast<const uint8_t*>(&entry) + sizeof entry.state,
                sizeof entry - sizeof entry.state);
    slot.sequence = sequence;
    __atomic_store_n(&slot.state, format::kSlotLive, __ATOMIC_RELEASE);
    if (*position == 0)
        ++stripe.index_used;
    *position = slot_index + 1;
    ++stripe.live;
    return result;
}

template <typename Action> bool LiveTable::with_entry(KeySpace space, uint64_t address, Action&& action) {
    if (slots_ == nullptr)
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
    if (slots_ == nullptr || low >= high)
        return false;
    // Ranges span stripes, so this scans the slots: only VMM unmaps of several mappings at once get here.
    for (;;) {
        uint64_t best_address = UINT64_MAX;
        for (const Stripe& stripe : stripes_) {
            // The file's mark, as `used` belongs to the stripe's lock. An object made before this call
            // lies below it; one made during the scan may be missed, as it always could be.
            const uint64_t used = __atomic_load_n(stripe.mark, __ATOMIC_ACQUIRE);
            for (uint32_t s = stripe.first_slot; s < stripe.first_slot + used; ++s) {
                const LiveSlot& slot = slots_[s];
                if (__atomic_load_n(&slot.state, __ATOMIC_ACQUIRE) == format::kSlotLive &&
                    slot.address >= low && slot.address < high && slot.address < best_address &&
                    format::key_space_of(static_cast<format::MemoryKind>(slot.kind)) == space)
                    best_address = slot.address;
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
    return with_entry(space, address, [&](Stripe&, uint32_t* entry) { *found = slots_[*entry - 1]; });
}

uint64_t LiveTable::live_count() const {
    uint64_t total = 0;
    for (const Stripe& stripe : stripes_)
        total += __atomic_load_n(&stripe.live, __ATOMIC_RELAXED);
    return total;
}

} // namespace gpuleak
