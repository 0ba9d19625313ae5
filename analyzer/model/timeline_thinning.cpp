#include "timeline_thinning.h"

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
      kept_((total + per_bucket_ - 1) / per_bucket_), unfilled_(kept_.size()),
      broken_(!std::is_sorted(samples_.begin(), samples_.end(), earlier)) {}

std::optional<std::vector<TimelinePoint>> StreamingThinner::finish() {
    if (!run_.empty())
        flush_run();
    while (!samples_.empty()) {
        const TimelinePoint& sample = samples_.back();
        emit(sample.time_ns, sample.reserved, sample.allocated, sample.rss);
        samples_.pop_back();
    }
    if (broken_ || remaining_ != 0)
        return std::nullopt;
    return std::move(kept_);
}

std::vector<TimelinePoint> sort_and_thin(std::vector<TimelinePoint> points, size_t ring_points) {
    sort_by_time(points, ring_points);
    if (points.size() <= kMaxTimelinePoints)
        return points;
    const size_t per_bucket = per_bucket_for(points.size());
    std::vector<TimelinePoint> kept;
    for (size_t start = 0; start < points.size(); start += per_bucket) {
        const size_t end = std::min(points.size(), start + per_bucket);
        kept.push_back(*std::max_element(
            points.begin() + static_cast<ptrdiff_t>(start), points.begin() + static_cast<ptrdiff_t>(end),
            [](const auto& a, const auto& b) { return a.reserved < b.reserved; }));
    }
    return kept;
}

} // namespace gpuleak::analyzer
