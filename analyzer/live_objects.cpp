#include "live_objects.h"

#include <algorithm>
#include <bit>
#include <utility>

namespace gpuleak::analyzer {

LiveObjects::LiveObjects(size_t expected) : entries_(std::bit_ceil(std::max<size_t>(16, expected * 2))) {}

size_t LiveObjects::home(format::KeySpace space, uint64_t address) const {
    // Addresses share their low bits (alignment) and high bits (one mapping): mix them all in.
    uint64_t x = address ^ (uint64_t{static_cast<uint8_t>(space)} << 56);
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    return static_cast<size_t>(x) & (entries_.size() - 1);
}

size_t LiveObjects::find(format::KeySpace space, uint64_t address) const {
    const size_t mask = entries_.size() - 1;
    size_t i = home(space, address);
    while (entries_[i].used && (entries_[i].address != address || entries_[i].space != space))
        i = (i + 1) & mask;
    return i;
}

void LiveObjects::assign(format::KeySpace space, uint64_t address, const LiveObject& object) {
    Entry& entry = entries_[find(space, address)];
    if (!entry.used) {
        if ((used_ + 1) * 2 > entries_.size()) {
            grow();
            assign(space, address, object);
            return;
        }
        entry.address = address;
        entry.space = space;
        entry.used = true;
        entry.set(object);
        ++used_;
        return;
    }
    entry.set(object);
}

bool LiveObjects::take(format::KeySpace space, uint64_t address, LiveObject& removed) {
    const size_t mask = entries_.size() - 1;
    size_t hole = find(space, address);
    if (!entries_[hole].used)
        return false;
    removed = entries_[hole].object();
    // Backward-shift deletion: an entry further along the run moves into the hole unless its home lies
    // cyclically after the hole, so that every entry stays reachable from its home without tombstones.
    for (size_t next = (hole + 1) & mask; entries_[next].used; next = (next + 1) & mask) {
        const size_t wanted = home(entries_[next].space, entries_[next].address);
        if (((next - wanted) & mask) >= ((next - hole) & mask)) {
            entries_[hole] = entries_[next];
            hole = next;
        }
    }
    entries_[hole].used = false;
    --used_;
    return true;
}

void LiveObjects::grow() {
    std::vector<Entry> old = std::exchange(entries_, std::vector<Entry>(entries_.size() * 2));
    used_ = 0;
    for (const Entry& entry : old)
        if (entry.used)
            assign(entry.space, entry.address, entry.object());
}

} // namespace gpuleak::analyzer
