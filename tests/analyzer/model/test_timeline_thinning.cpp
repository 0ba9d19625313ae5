// The streaming thinner against sort_and_thin, which it must match point for point, and the replay's
// live-object table against std::map.
#include <catch2/catch.hpp>

#include <algorithm>
#include <map>
#include <random>
#include <utility>
#include <vector>

#include "model/live_objects.h"
#include "model/timeline_thinning.h"

namespace {

using gpuleak::analyzer::DevicePoint;
using gpuleak::analyzer::kMaxTimelinePoints;
using gpuleak::analyzer::kTimeStretches;
using gpuleak::analyzer::LiveObject;
using gpuleak::analyzer::LiveObjects;
using gpuleak::analyzer::sort_and_thin;
using gpuleak::analyzer::StreamingThinner;
using gpuleak::analyzer::TimelinePoint;
using gpuleak::analyzer::TimeThinner;
namespace format = gpuleak::format;

bool same(const std::vector<TimelinePoint>& a, const std::vector<TimelinePoint>& b) {
    if (a.size() != b.size())
        return false;
    for (size_t i = 0; i < a.size(); ++i)
        if (a[i].time_ns != b[i].time_ns || a[i].reserved != b[i].reserved ||
            a[i].allocated != b[i].allocated || a[i].rss != b[i].rss || a[i].driver_used != b[i].driver_used)
            return false;
    return true;
}

// Few distinct times and values, so that equal times and equal maxima, which decide the order and the
// choice, are common.
struct Points {
    std::vector<TimelinePoint> ring; // newest first
    std::vector<TimelinePoint> samples;
};

Points random_points(std::mt19937_64& random, size_t ring_count, size_t sample_count) {
    Points points;
    uint64_t time = ring_count;
    for (size_t i = 0; i < ring_count; ++i) {
        time -= std::min<uint64_t>(time, random() % 3 == 0 ? 1 : 0);
        points.ring.push_back({time, random() % 8, random() % 8, {}, {}});
    }
    for (size_t i = 0; i < sample_count; ++i)
        points.samples.push_back(
            {random() % (ring_count + 2), random() % 8, random() % 8, random() % 5, random() % 9});
    std::stable_sort(points.samples.begin(), points.samples.end(),
                     [](const auto& a, const auto& b) { return a.time_ns < b.time_ns; });
    return points;
}

} // namespace

TEST_CASE("streaming thinning keeps what sorting and thinning all points keeps") {
    std::mt19937_64 random(7);
    for (const size_t ring_count : {size_t{0}, size_t{1}, size_t{500}, kMaxTimelinePoints - 3,
                                    kMaxTimelinePoints * 3 + 17, size_t{25000}}) {
        for (const size_t sample_count : {size_t{0}, size_t{3}, size_t{700}}) {
            const Points points = random_points(random, ring_count, sample_count);
            std::vector<TimelinePoint> all = points.ring;
            all.insert(all.end(), points.samples.begin(), points.samples.end());
            StreamingThinner thinner(all.size(), points.samples);
            for (const TimelinePoint& point : points.ring)
                REQUIRE(thinner.add(point.time_ns, point.reserved, point.allocated));
            const auto streamed = thinner.finish();
            REQUIRE(streamed);
            CHECK(same(*streamed, sort_and_thin(all, points.ring.size())));
            // The peaks of both lines survive.
            const auto highest = [](const std::vector<TimelinePoint>& of, uint64_t TimelinePoint::*field) {
                uint64_t most = 0;
                for (const TimelinePoint& point : of)
                    most = std::max(most, point.*field);
                return most;
            };
            CHECK(highest(*streamed, &TimelinePoint::reserved) == highest(all, &TimelinePoint::reserved));
            CHECK(highest(*streamed, &TimelinePoint::allocated) == highest(all, &TimelinePoint::allocated));
            CHECK(streamed->size() <= 2 * kMaxTimelinePoints + 1);
        }
    }
}

TEST_CASE("a thinned timeline ends with what was held at the end, below the peaks before it") {
    // Memory that rises to the end and drops at the last event: the last bucket's peaks come before it.
    const size_t count = kMaxTimelinePoints * 3 + 2;
    std::vector<TimelinePoint> ring; // newest first
    ring.push_back({count, 1, 0, {}, {}});
    for (uint64_t time = count - 1; time >= 1; --time)
        ring.push_back({time, time, time, {}, {}});
    StreamingThinner thinner(ring.size(), {});
    for (const TimelinePoint& point : ring)
        REQUIRE(thinner.add(point.time_ns, point.reserved, point.allocated));
    const auto streamed = thinner.finish();
    REQUIRE(streamed);
    const std::vector<TimelinePoint> sorted = sort_and_thin(ring, ring.size());
    for (const std::vector<TimelinePoint>* kept : {&*streamed, &sorted}) {
        CHECK(kept->back().time_ns == count);
        CHECK(kept->back().reserved == 1);
        CHECK(kept->back().allocated == 0);
        CHECK((*kept)[kept->size() - 2].allocated == count - 1);
    }
}

TEST_CASE("streaming thinning gives up on points out of order or of another count") {
    std::mt19937_64 random(11);
    const Points points = random_points(random, 5000, 100);
    const size_t total = points.ring.size() + points.samples.size();
    SECTION("a replay point newer than the one before") {
        StreamingThinner thinner(total, points.samples);
        CHECK(thinner.add(10, 0, 0));
        CHECK_FALSE(thinner.add(11, 0, 0));
        CHECK_FALSE(thinner.finish());
    }
    for (const size_t wrong : {total - 1, total + 1}) {
        StreamingThinner thinner(wrong, points.samples);
        for (const TimelinePoint& point : points.ring)
            thinner.add(point.time_ns, point.reserved, point.allocated);
        CHECK_FALSE(thinner.finish());
    }
}

TEST_CASE("a device's timeline thinned by time keeps every stretch's peak and what it held at its end") {
    std::mt19937_64 random(5);
    const uint64_t end_ns = 1'000'000;
    // A device's states over time, as the replay gives them (newest first), with samples between.
    std::vector<DevicePoint> states;
    uint64_t time = 0;
    for (size_t i = 0; i < 60000; ++i) {
        time += random() % 40;
        states.push_back({std::min(time, end_ns), random() % 1000, random() % 1000});
    }
    TimeThinner<DevicePoint, &DevicePoint::reserved, &DevicePoint::allocated> thinner(end_ns);
    for (auto it = states.rbegin(); it != states.rend(); ++it)
        thinner.add(*it);
    const std::vector<DevicePoint> kept = thinner.finish();
    REQUIRE(kept.size() <= 3 * kTimeStretches);
    REQUIRE(std::is_sorted(kept.begin(), kept.end(),
                           [](const auto& a, const auto& b) { return a.time_ns < b.time_ns; }));
    // What a step through the kept points reads at a stretch's end is the state after its last point;
    // its highest is the stretch's highest.
    const double per_ns = static_cast<double>(kTimeStretches) / static_cast<double>(end_ns + 1);
    using Stretches = std::map<size_t, std::pair<uint64_t, uint64_t>>; // reserved, allocated
    const auto read = [&](const std::vector<DevicePoint>& points, Stretches& most, Stretches& last) {
        for (const DevicePoint& point : points) {
            const auto stretch = static_cast<size_t>(static_cast<double>(point.time_ns) * per_ns);
            auto& [reserved, allocated] = most[stretch];
            reserved = std::max(reserved, point.reserved);
            allocated = std::max(allocated, point.allocated);
            last[stretch] = {point.reserved, point.allocated};
        }
    };
    Stretches most;
    Stretches last;
    read(states, most, last);
    Stretches kept_most;
    Stretches kept_last;
    read(kept, kept_most, kept_last);
    CHECK(kept_most == most);
    CHECK(kept_last == last);
}

TEST_CASE("live objects behave like a map, through growth and removals") {
    std::mt19937_64 random(3);
    LiveObjects objects(4);
    std::map<std::pair<int, uint64_t>, LiveObject> model;
    for (int step = 0; step < 200000; ++step) {
        const auto space = static_cast<format::KeySpace>(random() % 2);
        // Few addresses, all with the same low bits, so that runs in the table are long.
        const uint64_t address = 0x7f0000000000 + (random() % 3000) * 4096;
        const std::pair<int, uint64_t> key{static_cast<int>(space), address};
        if (random() % 2 == 0) {
            const LiveObject object{random(), format::MemoryKind::Device, 0, static_cast<uint32_t>(step)};
            objects.assign(space, address, object);
            model[key] = object;
        } else {
            LiveObject removed;
            const auto it = model.find(key);
            REQUIRE(objects.take(space, address, removed) == (it != model.end()));
            if (it != model.end()) {
                CHECK(removed.stack_id == it->second.stack_id);
                model.erase(it);
            }
        }
    }
    size_t count = 0;
    uint64_t sum = 0;
    objects.for_each([&](const LiveObject& object) {
        ++count;
        sum += object.size;
    });
    uint64_t model_sum = 0;
    for (const auto& [key, object] : model)
        model_sum += object.size;
    CHECK(count == model.size());
    CHECK(sum == model_sum);
}
