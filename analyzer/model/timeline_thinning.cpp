#include "model/timeline_thinning.h"

#include <algorithm>
#include <utility>

namespace gpuleak::analyzer {

namespace {

bool earlier(const TimelinePoint& a, const TimelinePoint& b) {
    return a.time_ns < b.time_ns;
}

// Sorts `points` by time, equal times in their present order (what std::stable_sort does), when the
// first `ring_points` are the replay's, newest first, and the rest the samples, oldest first. The replay's
// are in falling time unless threads raced between taking the time and claiming a ring slot; then, and
// only then, this falls back to std::stable_sort. Otherwise reversing them, restoring the order of equal
// times, and merging (stable: the replay's go first among equal times) gives the same in linear time.
void sort_by_time(std::vector<TimelinePoint>& points, size_t ring_points) {
    const auto ring_end = points.begin() + static_cast<ptrdiff_t>(ring_points);
    if (!std::is_sorted(points.begin(), ring_end,
                        [](const auto& a, const auto& b) { return a.time_ns > b.time_ns; }) ||
        !std::is_sorted(ring_end, points.end(), earlier)) {
        std::stable_sort(points.begin(), points.end(), earlier);
        return;
    }
    std::reverse(points.begin(), ring_end);
    for (auto run = points.begin(); run != ring_end;) {
        const auto run_end = std::find_if(
            run, ring_end, [&](const TimelinePoint& point) { return point.time_ns != run->time_ns; });
        std::reverse(run, run_end);
        run = run_end;
    }
    std::inplace_merge(points.begin(), ring_end, points.end(), earlier);
}

size_t per_bucket_for(size_t total) {
    return total <= kMaxTimelinePoints ? 1 : (total + kMaxTimelinePoints - 1) / kMaxTimelinePoints;
}

} // namespace

StreamingThinner::StreamingThinner(size_t total, std::vector<TimelinePoint> samples)
    : samples_(std::move(samples)), per_bucket_(per_bucket_for(total)), remaining_(total),
      bucket_(total / per_bucket_), in_bucket_(total % per_bucket_),
      most_reserved_((total + per_bucket_ - 1) / per_bucket_), most_allocated_(most_reserved_.size()),
      unfilled_(most_reserved_.size()), broken_(!std::is_sorted(samples_.begin(), samples_.end(), earlier)) {}

std::optional<std::vector<TimelinePoint>> StreamingThinner::finish() {
    if (!run_.empty())
        flush_run();
    while (!samples_.empty())
        emit_sample();
    if (broken_ || remaining_ != 0)
        return std::nullopt;
    std::vector<TimelinePoint> kept;
    for (size_t bucket = 0; bucket < most_reserved_.size(); ++bucket) {
        const Kept& reserved = most_reserved_[bucket];
        const Kept& allocated = most_allocated_[bucket];
        const auto [earlier, later] =
            std::minmax(reserved, allocated, [](const Kept& a, const Kept& b) { return a.index < b.index; });
        kept.push_back(earlier.point);
        if (later.index != earlier.index)
            kept.push_back(later.point);
        if (bucket + 1 == most_reserved_.size() && last_ && last_->index != later.index)
            kept.push_back(last_->point);
    }
    return kept;
}

std::vector<TimelinePoint> sort_and_thin(std::vector<TimelinePoint> points, size_t ring_points) {
    sort_by_time(points, ring_points);
    if (points.size() <= kMaxTimelinePoints)
        return points;
    const size_t per_bucket = per_bucket_for(points.size());
    std::vector<TimelinePoint> kept;
    for (size_t start = 0; start < points.size(); start += per_bucket) {
        const auto first = points.begin() + static_cast<ptrdiff_t>(start);
        const auto last =
            points.begin() + static_cast<ptrdiff_t>(std::min(points.size(), start + per_bucket));
        const auto reserved = std::max_element(
            first, last, [](const auto& a, const auto& b) { return a.reserved < b.reserved; });
        const auto allocated = std::max_element(
            first, last, [](const auto& a, const auto& b) { return a.allocated < b.allocated; });
        kept.push_back(*std::min(reserved, allocated));
        if (allocated != reserved)
            kept.push_back(*std::max(reserved, allocated));
        if (last == points.end() && std::max(reserved, allocated) != last - 1)
            kept.push_back(*(last - 1));
    }
    return kept;
}

} // namespace gpuleak::analyzer
