// The streaming thinner against sort_and_thin, which it must match point for point, and the replay's
// live-object table against std::map.
#include <catch2/catch.hpp>

#include <algorithm>
#include <map>
#include <random>
#include <utility>
#include <vector>

#include "live_objects.h"
#include "timeline_thinning.h"

namespace {

using gpuleak::analyzer::kMaxTimelinePoints;
using gpuleak::analyzer::LiveObject;
using gpuleak::analyzer::LiveObjects;
using gpuleak::analyzer::sort_and_thin;
using gpuleak::analyzer::StreamingThinner;
using gpuleak::analyzer::TimelinePoint;
namespace format = gpuleak::format;

bool same(const std::vector<TimelinePoint>& a, const std::vector<TimelinePoint>& b) {
    if (a.size() != b.size())
        return false;
    for (size_t i = 0; i < a.size(); ++i)
        if (a[i].time_ns != b[i].time_ns || a[i].reserved != b[i].reserved ||
            a[i].allocated != b[i].allocated || a[i].rss != b[i].rss)
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
        points.ring.push_back({time, random() % 8, i, {}});
    }
    for (size_t i = 0; i < sample_count; ++i)
        points.samples.push_back({random() % (ring_count + 2), random() % 8, i, random() % 5});
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
        }
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
