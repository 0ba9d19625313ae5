#include <catch2/catch.hpp>

#include "temp_dir.h"
#include "timeline_sampler.h"
#include "trace_reader.h"

using gpuleak::TimelineSampler;
using gpuleak::TraceWriter;
using gpuleak::analyzer::TraceReader;

namespace {

// A small trace in `dir` whose sampler thread stays asleep: the tests take the samples.
gpuleak::Config config_in(const TempDir& dir) {
    gpuleak::Config config = gpuleak::read_config();
    std::snprintf(config.output_pattern, sizeof config.output_pattern, "%s/t.trace", dir.path().c_str());
    config.max_bytes = gpuleak::kMinMaxMb << 20;
    config.sample_interval_ms = 60000;
    return config;
}

} // namespace

TEST_CASE("the timeline is thinned to cover the whole run when it fills") {
    TempDir dir;
    TraceWriter writer;
    REQUIRE(writer.create(config_in(dir), {1, 0, ""}));
    TimelineSampler sampler;
    sampler.start(
        writer, [] {}, [] { return uint64_t{7}; }, false);

    const uint64_t capacity = writer.header()->timeline_capacity;
    const uint64_t taken = capacity * 3 + 10; // two thinnings
    auto& live =
        writer.header()->accounting.live_bytes[0][static_cast<int>(gpuleak::format::MemoryKind::Device)];
    for (uint64_t i = 1; i < taken; ++i) {
        live = i;
        sampler.sample_now();
    }

    TraceReader reader = TraceReader::open(writer.path());
    const auto& samples = reader.timeline();
    CHECK(reader.header().counters.timeline_samples == taken);
    CHECK(samples.size() <= capacity);
    CHECK(samples.size() >= capacity / 2);
    // The first and the most recent sample survive every thinning.
    CHECK(samples.front().sample == 0);
    CHECK(samples.back().sample == taken - 1);
    CHECK(samples.back().device_bytes[0] == taken - 1);
    CHECK(samples.back().kind_bytes[static_cast<int>(gpuleak::format::MemoryKind::Device)] == taken - 1);
    CHECK(samples.back().rss_bytes > 0);
    // Each thinning keeps every other sample and doubles the interval, so the gaps between the
    // samples kept never exceed the factor by which the interval grew: evenly thinned, no holes.
    const uint64_t growth = reader.header().counters.timeline_interval_ns / (60000ull * 1000000ull);
    CHECK(growth >= 4);
    CHECK((growth & (growth - 1)) == 0);
    for (size_t i = 1; i < samples.size(); ++i) {
        REQUIRE(samples[i].time_ns >= samples[i - 1].time_ns);
        REQUIRE(samples[i].sample - samples[i - 1].sample <= growth);
    }
}

namespace {
int g_module_counts = 0;
uint64_t g_modules = 0;
uint64_t count_modules() {
    ++g_module_counts;
    return g_modules;
}
} // namespace

TEST_CASE("an exit's and an exec's samples take none of the C library's locks") {
    TempDir dir;
    TraceWriter writer;
    REQUIRE(writer.create(config_in(dir), {1, 0, ""}));
    TimelineSampler sampler;
    sampler.start(
        writer, [] {}, count_modules, false);
    // An exec or an exit may come from a signal handler that interrupted malloc: malloc's free memory is
    // read at timed samples only, and the module count only once a timed sample read one. Finding the
    // interpreter takes the dynamic linker's locks; reading the count of one found takes none.
    REQUIRE(g_module_counts == 1);
    sampler.sample_now(gpuleak::SampleMoment::Exec);
    sampler.sample_now(gpuleak::SampleMoment::Exit);
    CHECK(g_module_counts == 1);
    g_modules = 7;
    sampler.sample_now();
    CHECK(g_module_counts == 2);
    // Now an exit says whether the interpreter was still there (0: it finalized).
    sampler.sample_now(gpuleak::SampleMoment::Exit);
    CHECK(g_module_counts == 3);
    g_modules = 0;
    sampler.sample_now(gpuleak::SampleMoment::Exit);
    CHECK(g_module_counts == 4);

    TraceReader reader = TraceReader::open(writer.path());
    const auto& samples = reader.timeline();
    REQUIRE(samples.size() == 6);
    CHECK(samples[0].python_modules == 0);
    CHECK(samples[1].python_modules == 0);
    CHECK(samples[2].python_modules == 0);
    CHECK(samples[3].python_modules == 7);
    CHECK(samples[4].python_modules == 7);
    CHECK(samples[5].python_modules == 0);
}
