// The report's timeline: the model's points in time order, thinned to a bounded number. From each run
// of per_bucket consecutive points (per_bucket = ceil(points / kMaxTimelinePoints)) it keeps the first
// with the most reserved and the first with the most allocated (one point where they are the same), in
// their order, so that the peaks of both survive; and the last point, so that the timeline ends with what
// was held at the end.
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "model/process_model.h"

namespace gpuleak::analyzer {

inline constexpr size_t kMaxTimelinePoints = 2000;
// TimeThinner's stretches: with a point for each weight's peak and one for the end of each, a device's
// timeline keeps up to 3000 points.
inline constexpr size_t kTimeStretches = 1000;

// Thins while the replay produces its points, newest first, merging in the samples: memory follows the
// points kept, not the events. It keeps exactly what sort_and_thin keeps for the same points, when the
// replay's come in falling time (threads that raced between taking the time and claiming a ring slot
// can break that; add() then says so, and the caller falls back to sort_and_thin).
class StreamingThinner {
  public:
    // `total`: how many points there will be, the replay's and the samples, as the runs count from the
    // oldest. `samples`: oldest first.
    StreamingThinner(size_t total, std::vector<TimelinePoint> samples);

    // The replay's next point (the replay knows no RSS). False when it breaks the promises above: then
    // finish() has no result. The fields come apart, not as a TimelinePoint just built by the caller:
    // copying such a point whole, at every event, stalls on the stores that built it. Inline, with what
    // it calls, as it runs at every event.
    bool add(uint64_t time_ns, uint64_t reserved, uint64_t allocated) {
        if (!run_.empty() && time_ns != run_.back().time_ns) {
            if (time_ns > run_.back().time_ns)
                broken_ = true;
            else
                flush_run();
        }
        run_.push_back({time_ns, reserved, allocated});
        return !broken_;
    }
    // The points kept, oldest first, or nothing when the points did not come as promised.
    std::optional<std::vector<TimelinePoint>> finish();

  private:
    struct ReplayPoint {
        uint64_t time_ns;
        uint64_t reserved;
        uint64_t allocated;
    };

    // In time order, equal times keep the replay's points first, in the replay's order, and the samples
    // after them: so, going backwards, the samples at or after the run's time, then the run reversed.
    void flush_run() {
        while (!samples_.empty() && samples_.back().time_ns >= run_.back().time_ns) {
            emit_sample();
        }
        for (auto it = run_.rbegin(); it != run_.rend(); ++it)
            emit(it->time_ns, it->reserved, it->allocated, std::nullopt, std::nullopt);
        run_.clear();
    }

    void emit_sample() {
        const TimelinePoint& sample = samples_.back();
        emit(sample.time_ns, sample.reserved, sample.allocated, sample.rss, sample.driver_used);
        samples_.pop_back();
    }

    void emit(uint64_t time_ns, uint64_t reserved, uint64_t allocated, std::optional<uint64_t> rss,
              std::optional<uint64_t> driver_used) {
        if (remaining_ == 0) {
            broken_ = true;
            return;
        }
        --remaining_;
        if (!last_)
            last_ = Kept{TimelinePoint{time_ns, reserved, allocated, rss, driver_used}, remaining_};
        if (in_bucket_ == 0) {
            --bucket_;
            in_bucket_ = per_bucket_;
        }
        --in_bucket_;
        // Going backwards, a point that ties the bucket's most so far is the earlier one: it wins.
        Kept& most_reserved = most_reserved_[bucket_];
        Kept& most_allocated = most_allocated_[bucket_];
        const bool first = bucket_ < unfilled_;
        if (first)
            unfilled_ = bucket_;
        const bool takes_reserved = first || reserved >= most_reserved.point.reserved;
        const bool takes_allocated = first || allocated >= most_allocated.point.allocated;
        if (!takes_reserved && !takes_allocated)
            return;
        const Kept kept{TimelinePoint{time_ns, reserved, allocated, rss, driver_used}, remaining_};
        if (takes_reserved)
            most_reserved = kept;
        if (takes_allocated)
            most_allocated = kept;
    }

    struct Kept {
        TimelinePoint point;
        size_t index = 0; // in time order among all the points
    };

    std::vector<TimelinePoint> samples_; // those not yet emitted
    size_t per_bucket_ = 1;
    size_t remaining_; // points not yet emitted; the next one emitted has this index - 1
    // remaining_ / per_bucket_ and remaining_ % per_bucket_, counted down with it: a division at every
    // event costs more than the rest of emit().
    size_t bucket_;
    size_t in_bucket_;
    std::vector<Kept> most_reserved_;  // per bucket
    std::vector<Kept> most_allocated_; // per bucket
    size_t unfilled_;                  // buckets from this one up have their points
    std::optional<Kept> last_;         // the newest point, the first emitted
    std::vector<ReplayPoint> run_;     // replay points of one time, in the replay's order
    bool broken_ = false;
};

// A series thinned by time, for a timeline drawn as steps: the process's time up to `end_ns` is cut into
// `stretches` (kTimeStretches unless said) of equal length, and each keeps its point of most of each of
// `Weights` (the earliest of equals), so that every line's peaks survive, and its latest (the first given of
// equal times: the replay gives the latest state first), so that a step through the points reads what was
// held after every stretch. Points come in any order; memory follows the stretches, not the points.
template <class Point, uint64_t Point::*... Weights> class TimeThinner {
  public:
    explicit TimeThinner(uint64_t end_ns, size_t stretches = kTimeStretches)
        : per_ns_(static_cast<double>(stretches) / (static_cast<double>(end_ns) + 1)), stretches_(stretches) {
    }

    void add(const Point& point) {
        // Compared as a double: a time far past the end (a corrupt trace's) does not fit a size_t.
        const double at = static_cast<double>(point.time_ns) * per_ns_;
        const size_t last = stretches_.size() - 1;
        Stretch& stretch = stretches_[at < static_cast<double>(last) ? static_cast<size_t>(at) : last];
        if (!stretch.any) {
            stretch.most.fill(point);
            stretch.latest = point;
            stretch.any = true;
            return;
        }
        size_t weight = 0;
        (keep_most(stretch.most[weight++], point, Weights), ...);
        if (point.time_ns > stretch.latest.time_ns)
            stretch.latest = point;
    }

    // Oldest first, each point once.
    [[nodiscard]] std::vector<Point> finish() const {
        std::vector<Point> points;
        for (const Stretch& stretch : stretches_) {
            if (!stretch.any)
                continue;
            const size_t first = points.size();
            for (const Point& point : stretch.most)
                points.push_back(point);
            points.push_back(stretch.latest);
            // In time order, the latest last of equal times; then each point once.
            std::stable_sort(points.begin() + static_cast<std::ptrdiff_t>(first), points.end(),
                             [](const Point& a, const Point& b) { return a.time_ns < b.time_ns; });
            points.erase(std::unique(points.begin() + static_cast<std::ptrdiff_t>(first), points.end(), same),
                         points.end());
        }
        return points;
    }

  private:
    static void keep_most(Point& most, const Point& point, uint64_t Point::*weight) {
        if (point.*weight > most.*weight || (point.*weight == most.*weight && point.time_ns < most.time_ns))
            most = point;
    }
    static bool same(const Point& a, const Point& b) {
        return a.time_ns == b.time_ns && ((a.*Weights == b.*Weights) && ...);
    }
    struct Stretch {
        std::array<Point, sizeof...(Weights)> most;
        Point latest;
        bool any = false;
    };
    double per_ns_;
    std::vector<Stretch> stretches_;
};

// A device's reserved and allocated bytes over time, each line's peaks kept.
using DeviceThinner = TimeThinner<DevicePoint, &DevicePoint::reserved, &DevicePoint::allocated>;

// The same for points all in memory: the first `ring_points` are the replay's, newest first, the rest
// the samples, oldest first.
std::vector<TimelinePoint> sort_and_thin(std::vector<TimelinePoint> points, size_t ring_points);

} // namespace gpuleak::analyzer
