#include "read/event_ring.h"

#include <utility>

namespace gpuleak::analyzer {

EventRing::EventRing(std::span<const std::byte> bytes, uint64_t head, uint64_t capacity,
                     std::shared_ptr<const void> owner, const MappedFile* file)
    : bytes_(bytes), owner_(std::move(owner)), file_(file), capacity_(capacity) {
    first_ = head > capacity ? head - capacity : 0;
    window_ = head - first_;
    // Only the slots present in the file are visited: the counters and capacity come from the header,
    // and a corrupt one must not send a visit through slots a truncated file does not have. The region
    // may also hold more slots than the capacity: those past it are not the ring's.
    const uint64_t present_slots = bytes.size() / sizeof(format::EventRecord);
    start_ = capacity == 0 ? 0 : first_ % capacity;
    a_end_ = std::max(start_, std::min({start_ + window_, capacity, present_slots}));
    b_end_ = start_ != 0 ? std::min(start_, present_slots) : 0;
}

void EventRing::release(uint64_t begin, uint64_t end, uint64_t segment_end) const {
    if (file_ == nullptr)
        return;
    // 64 KiB: at least one page on every system Linux runs on.
    constexpr uint64_t kLargestPage = 65536;
    const uint64_t from = begin * sizeof(format::EventRecord);
    const uint64_t to =
        std::min(end * sizeof(format::EventRecord) + kLargestPage, segment_end * sizeof(format::EventRecord));
    file_->release(bytes_.subspan(from, to - from));
}

} // namespace gpuleak::analyzer
