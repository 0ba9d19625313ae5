// The report's timeline: the model's points in time order, thinned to a bounded number. From each run
// of per_bucket consecutive points (per_bucket = ceil(points / kMaxTimelinePoints)) it keeps the first
// with the most reserved, so that peaks survive.
#pragma once

#include <cstddef>
#include <optional>
#include <vector>

#include "process_model.h"

namespace gpuleak::analyzer {

inline constexpr size_t kMaxTimelinePoints = 2000;

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
            const TimelinePoint& sample = samples_.back();
            emit(sample.time_ns, sample.reserved, sample.allocated, sample.rss);
            samples_.pop_back();
        }
        for (auto it = run_.rbegin(); it != run_.rend(); ++it)
            emit(it->time_ns, it->reserved, it->allocated, std::nullopt);
        run_.clear();
    }

    void emit(uint64_t time_ns, uint64_t reserved, uint64_t allocated, std::optional<uint64_t> rss) {
        if (remaining_ == 0) {
            broken_ = true;
            return;
        }
        --remaining_;
        if (in_bucket_ == 0) {
            --bucket_;
            in_bucket_ = per_bucket_;
        }
        --in_bucket_;
        // Going backwards, a point that ties the bucket's most so far is the earlier one: it wins.
        if (bucket_ < unfilled_)
            unfilled_ = bucket_;
        else if (reserved < kept_[bucket_].reserved)
            return;
        kept_[bucket_] = TimelinePoint{time_ns, reserved, allocated, rss};
    }

    std::vector<TimelinePoint> samples_; // those not yet emitted
    size_t per_bucket_ = 1;
    size_t remaining_; // points not yet emitted; the next one emitted has this index - 1
    // remaining_ / per_bucket_ and remaining_ % per_bucket_, counted down with it: a division at every
    // event costs more than the rest of emit().
    size_t bucket_;
    size_t in_bucket_;
    std::vector<TimelinePoint> kept_; // per bucket
    size_t unfilled_;                 // buckets from this one up have a point
    std::vector<ReplayPoint> run_;    // replay points of one time, in the replay's order
    bool broken_ = false;
};

// The same for points all in memory: the first `ring_points` are the replay's, newest first, the rest
// the samples, oldest first.
std::vector<TimelinePoint> sort_and_thin(std::vector<TimelinePoint> points, size_t ring_points);

} // namespace gpuleak::analyzer
