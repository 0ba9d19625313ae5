// The event ring of a trace, read in place. A ring can hold tens of millions of events; decoding them all
// into memory would cost more than the analysis needs, which walks them once, newest first. So a record
// is copied out, validated and decoded only when a visit reaches it, and the pages a visit has passed
// are handed back, so that reading a ring of any size takes memory independent of its length.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <span>

#include "read/event_record.h"
#include "read/mapped_file.h"

namespace gpuleak::analyzer {

class EventRing {
  public:
    EventRing() = default;
    // `bytes`: the part of the ring region present in the file, kept alive by `owner`. `file`, when the
    // bytes are mapped from it, lets a visit release the pages it is done with; null for bytes in memory.
    EventRing(std::span<const std::byte> bytes, uint64_t head, uint64_t capacity,
              std::shared_ptr<const void> owner, const MappedFile* file);

    // Events claimed but overwritten since: the oldest ones.
    [[nodiscard]] uint64_t dropped() const { return first_; }
    // The newest events, which the ring should hold.
    [[nodiscard]] uint64_t window() const { return window_; }
    // Slots of the window present in the file: a visit sees at most this many events.
    [[nodiscard]] uint64_t present() const { return (a_end_ - start_) + b_end_; }

    // Calls visit(const Event&) for each event of the window that is committed with its own sequence
    // number and well formed, newest first, until visit returns false. Returns how many it visited.
    // The commit rule is the writer's: a slot holds event n when its commit word is n + 1.
    template <class Visit> uint64_t visit_newest_first(Visit&& visit) const {
        uint64_t visited = 0;
        // Once wrapped, the window continues from slot 0 after the slot `start_` it began at.
        if (!visit_slots(0, b_end_, first_ + (capacity_ - start_), visit, visited))
            return visited;
        visit_slots(start_, a_end_, first_ - start_, visit, visited);
        return visited;
    }

  private:
    // Records per release: large enough that madvise costs nothing per event.
    static constexpr uint64_t kChunkRecords = 16384;
    // Left to the hardware prefetcher, the backward read of the ring stalls on most records (measured,
    // bench/README.md): they are requested this far ahead, without temporal locality, so that they
    // neither stall the visit nor push the visitor's own tables out of the caches.
    static constexpr uint64_t kReadAhead = 16;

    // Slots [begin, end), newest (highest) first; slot s holds event `base + s`.
    template <class Visit>
    bool visit_slots(uint64_t begin, uint64_t end, uint64_t base, Visit& visit, uint64_t& visited) const {
        for (uint64_t chunk_end = end; chunk_end > begin;) {
            const uint64_t chunk_begin = chunk_end - std::min(chunk_end - begin, kChunkRecords);
            for (uint64_t slot = chunk_end; slot-- > chunk_begin;) {
                if (slot >= begin + kReadAhead)
                    __builtin_prefetch(bytes_.data() + (slot - kReadAhead) * sizeof(format::EventRecord), 0,
                                       0);
                // Copied out once, then validated and decoded from the copy: a process still writing the
                // file cannot change a field between its check and its use.
                format::EventRecord record;
                std::memcpy(&record, bytes_.data() + slot * sizeof(record), sizeof(record));
                const uint64_t sequence = base + slot;
                if (record.commit != sequence + 1 || !valid_event(record))
                    continue;
                ++visited;
                if (!visit(decode_event(record, sequence)))
                    return false;
            }
            release(chunk_begin, chunk_end, end);
            chunk_end = chunk_begin;
        }
        return true;
    }

    // Hands back the pages of slots [begin, end), visited, and of the page they share with the slots
    // above, up to segment_end, visited before: only whole pages can be released.
    void release(uint64_t begin, uint64_t end, uint64_t segment_end) const;

    std::span<const std::byte> bytes_;
    std::shared_ptr<const void> owner_;
    const MappedFile* file_ = nullptr;
    uint64_t capacity_ = 0;
    uint64_t first_ = 0;  // sequence number of the oldest event in the window
    uint64_t window_ = 0; // events in the window
    uint64_t start_ = 0;  // slot of the oldest event
    uint64_t a_end_ = 0;  // the window's slots from start_ up to here (exclusive) are present
    uint64_t b_end_ = 0;  // and, once wrapped, those from 0 up to here
};

} // namespace gpuleak::analyzer
