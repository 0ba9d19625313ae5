#include <catch2/catch.hpp>
#include <unistd.h>

#include "read/trace_reader.h"
#include "recording/driver_view.h"
#include "recording/timeline_sampler.h"
#include "temp_dir.h"

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

uint64_t seven_modules() {
    return 7;
}

// A sampler started on such a trace, as the recorder starts it, with the interpreter's module count.
struct SampledTrace {
    explicit SampledTrace(uint64_t (*python_modules)() = seven_modules,
                          gpuleak::TraceStart how = gpuleak::TraceStart::FirstEvent) {
        REQUIRE(writer.create(config_in(dir), {1, 0, ""}));
        sampler.start(
            writer, [] {}, python_modules, how);
    }
    TempDir dir;
    TraceWriter writer;
    TimelineSampler sampler;
};

} // namespace

TEST_CASE("the timeline is thinned to cover the whole run when it fills") {
    SampledTrace trace;
    TraceWriter& writer = trace.writer;
    TimelineSampler& sampler = trace.sampler;

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

TEST_CASE("a trace begun inside fork() has its baseline before the child runs on, and USS from the thread") {
    using gpuleak::format::HostField;
    SampledTrace trace(seven_modules, gpuleak::TraceStart::Fork);
    // What the child holds when fork() returns into it: whatever it allocates afterwards is growth,
    // however soon the sampler's thread gets to run.
    const TraceReader at_fork = TraceReader::open(trace.writer.path());
    REQUIRE(!at_fork.timeline().empty());
    const auto& baseline = at_fork.timeline().front();
    CHECK(baseline.rss_bytes > 0);
    CHECK(baseline.has(HostField::Status));
    CHECK_FALSE(baseline.has(HostField::Proportional));
    // The thread's first sample, taken at once, walks the page tables for USS and PSS.
    const auto taken = [&] {
        return __atomic_load_n(&trace.writer.header()->timeline_samples, __ATOMIC_ACQUIRE);
    };
    for (int waited_ms = 0; taken() < 2 && waited_ms < 30000; waited_ms += 10)
        usleep(10000);
    const TraceReader later = TraceReader::open(trace.writer.path());
    REQUIRE(later.timeline().size() >= 2);
    CHECK(later.timeline()[1].has(HostField::Proportional));
}

TEST_CASE("a sample holds each device's allocated blocks and what its driver last said was used, and when") {
    SampledTrace trace;
    gpuleak::format::FileHeader& header = *trace.writer.header();
    header.accounting.live_bytes[1][static_cast<int>(gpuleak::format::MemoryKind::Block)] = 3000;
    header.accounting.live_bytes[1][static_cast<int>(gpuleak::format::MemoryKind::Device)] = 4096;
    header.device_memory[1] = {
        .total_bytes = 10000, .lowest_free_bytes = 1000, .last_free_bytes = 2500, .last_time_ns = 12345};
    trace.sampler.sample_now();

    TraceReader reader = TraceReader::open(trace.writer.path());
    REQUIRE(!reader.timeline().empty());
    const auto& sample = reader.timeline().back();
    CHECK(sample.device_block_bytes[1] == 3000);
    CHECK(sample.device_bytes[1] == 4096);
    REQUIRE(sample.driver_said[1]);
    CHECK(sample.driver_said[1]->used_bytes == 7500);
    CHECK(sample.driver_said[1]->time_ns == 12345);
    // A device the driver was never asked about has no answer, not a used figure of 0.
    CHECK_FALSE(sample.driver_said[0]);
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
    SampledTrace trace(count_modules);
    TimelineSampler& sampler = trace.sampler;
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

    TraceReader reader = TraceReader::open(trace.writer.path());
    const auto& samples = reader.timeline();
    REQUIRE(samples.size() == 6);
    CHECK(samples[0].python_modules == 0);
    CHECK(samples[1].python_modules == 0);
    CHECK(samples[2].python_modules == 0);
    CHECK(samples[3].python_modules == 7);
    CHECK(samples[4].python_modules == 7);
    CHECK(samples[5].python_modules == 0);
}

TEST_CASE("the driver is asked every 100 ms, sooner when the program's memory moved by a sixteenth, never "
          "twice in 1 ms") {
    using gpuleak::driver_view_due;
    using gpuleak::driver_view_moved;
    constexpr uint64_t kMiB = uint64_t{1} << 20;
    constexpr uint64_t kMs = 1'000'000;
    // A sixteenth of what was held, and at least 1 MiB, either way.
    CHECK_FALSE(driver_view_moved(32 * kMiB + 2 * kMiB - 1, 32 * kMiB));
    CHECK(driver_view_moved(32 * kMiB + 2 * kMiB, 32 * kMiB));
    CHECK(driver_view_moved(30 * kMiB, 32 * kMiB));
    CHECK_FALSE(driver_view_moved(kMiB - 1, 0));
    CHECK(driver_view_moved(kMiB, 0));
    // Never asked: at the first allocation or free.
    CHECK(driver_view_due(UINT64_MAX, false));
    // Within 1 ms of the last question: not even after the largest move.
    CHECK_FALSE(driver_view_due(kMs - 1, true));
    CHECK(driver_view_due(kMs, true));
    CHECK_FALSE(driver_view_due(50 * kMs, false));
    // Every 100 ms whatever moved.
    CHECK(driver_view_due(100 * kMs, false));
}
