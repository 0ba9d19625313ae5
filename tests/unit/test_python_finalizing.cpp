// The start of Python's finalization (format 6, EventType::PythonFinalizing): the record read back, a
// torn one ignored, growth judged on the events before it, and how the reports show it.
#include <catch2/catch.hpp>

#include "diagnosis.h"
#include "diagnosis_text.h"
#include "in_memory_report.h"
#include "process_model.h"
#include "render_json.h"
#include "render_text.h"
#include "report.h"
#include "symbolized_stacks.h"
#include "trace_builder.h"
#include "trace_reader.h"

using namespace gpuleak::analyzer;
using gpuleak::test::report_of;
using gpuleak::test::TraceBuilder;
using gpuleak::test::TraceLayout;
namespace format = gpuleak::format;

namespace {

constexpr uint64_t kMiB = 1 << 20;
constexpr uint64_t kMillisecond = 1'000'000;
constexpr uint64_t kStart = 1000;

format::EventRecord python_finalizing(uint64_t time_ns) {
    format::EventRecord record{};
    record.type = static_cast<uint16_t>(format::EventType::PythonFinalizing);
    record.time_ns = time_ns;
    record.thread_id = 7;
    record.device = -2;
    return record;
}

format::EventRecord event_of(format::EventType type, uint64_t address, uint64_t time_ns) {
    format::EventRecord record{};
    record.type = static_cast<uint16_t>(type);
    record.kind = static_cast<uint8_t>(format::MemoryKind::Device);
    record.address = address;
    record.size = kMiB;
    record.stack_id = 1;
    record.time_ns = time_ns;
    return record;
}

// A program whose 6 steps of 50 ms each kept 1 MiB and freed a temporary, then took 3 s to exit, with
// 50 temporaries made and freed in the teardown: finalization began at `finalizing_ms` (with the ring's
// head then, or `finalizing_head` in its place), or was not recorded.
TraceBuilder leak_then_slow_exit(std::optional<uint64_t> finalizing_ms,
                                 std::optional<uint64_t> finalizing_head = std::nullopt) {
    TraceBuilder builder(TraceLayout{.ring_capacity = 256, .notable_capacity = 8});
    builder.header().start_monotonic_ns = kStart;
    builder.add_stack(1, {0x401000});
    builder.add_stack(2, {0x402000});
    for (uint64_t i = 0; i < 6; ++i) {
        const uint64_t time_ns = kStart + i * 50 * kMillisecond;
        format::EventRecord temporary = event_of(format::EventType::Alloc, 0x20000000, time_ns);
        temporary.stack_id = 2;
        builder.append_event(temporary);
        temporary.type = static_cast<uint16_t>(format::EventType::Free);
        builder.append_event(temporary);
        format::LiveSlot slot{};
        slot.state = format::kSlotLive;
        slot.address = 0x10000000 + i * kMiB;
        slot.size = kMiB;
        slot.kind = static_cast<uint8_t>(format::MemoryKind::Device);
        slot.stack_id = 1;
        slot.time_ns = time_ns;
        slot.sequence = builder.header().ring_head;
        builder.append_event(event_of(format::EventType::Alloc, slot.address, time_ns));
        builder.set_live(i, slot);
    }
    if (finalizing_ms) {
        format::EventRecord finalizing = python_finalizing(kStart + *finalizing_ms * kMillisecond);
        finalizing.size = finalizing_head.value_or(builder.header().ring_head);
        builder.add_notable(finalizing);
    }
    for (uint64_t i = 0; i < 50; ++i) {
        const uint64_t time_ns = kStart + (400 + i * 50) * kMillisecond;
        builder.append_event(event_of(format::EventType::Alloc, 0x30000000, time_ns));
        builder.append_event(event_of(format::EventType::Free, 0x30000000, time_ns));
    }
    builder.header().accounting.live_bytes[0][static_cast<int>(format::MemoryKind::Device)] = 6 * kMiB;
    builder.header().accounting.peak_bytes[0][static_cast<int>(format::MemoryKind::Device)] = 7 * kMiB;
    builder.end_exited(0, kStart + 3000 * kMillisecond);
    return builder;
}

TraceReader parse(const TraceBuilder& builder) {
    return TraceReader::parse(builder.bytes(), "trace.bin");
}

} // namespace

TEST_CASE("a PythonFinalizing record round-trips through the reader") {
    const TraceReader trace = parse(leak_then_slow_exit(300));
    const auto& events = trace.notable_events().events;
    REQUIRE(events.size() == 1);
    CHECK(events[0].type == format::EventType::PythonFinalizing);
    CHECK(events[0].time_ns == kStart + 300 * kMillisecond);
    CHECK(events[0].thread_id == 7);
    CHECK(trace.warnings().empty());
    CHECK(std::string(format::event_type_name(events[0].type)) == "python_finalizing");
}

TEST_CASE("a torn PythonFinalizing record is ignored, and the run's whole duration counts") {
    TraceBuilder builder = leak_then_slow_exit(300);
    // In flight when the process died: its commit word is not there.
    builder.put<uint64_t>(builder.header().notable.offset, 0);
    const TraceReader trace = parse(builder);
    CHECK(trace.notable_events().events.empty());
    CHECK(trace.notable_events().torn == 1);
    const ProcessModel model = build_model("trace.bin", trace);
    CHECK_FALSE(model.code_end_ns);
    REQUIRE(model.leak_sites.size() == 1);
    CHECK_FALSE(model.leak_sites[0].growing);
}

TEST_CASE("growth is judged on the program's events before Python's finalization") {
    SECTION("without the record, survivors made through the first 18 of 118 events are not growth") {
        const ProcessModel model = build_model("trace.bin", parse(leak_then_slow_exit(std::nullopt)));
        CHECK_FALSE(model.code_end_ns);
        CHECK(model.program_events == 118);
        REQUIRE(model.leak_sites.size() == 1);
        CHECK_FALSE(model.leak_sites[0].growing);
        CHECK(model.growth_sites.empty());
    }
    SECTION("with it, survivors made through the program's 18 events are") {
        const ProcessModel model = build_model("trace.bin", parse(leak_then_slow_exit(300)));
        CHECK(model.code_end_ns == 300 * kMillisecond);
        CHECK(model.duration_ns == 3000 * kMillisecond);
        CHECK(model.program_events == 18);
        REQUIRE(model.leak_sites.size() == 1);
        CHECK(model.leak_sites[0].growing);
        CHECK(model.growth_sites == std::vector<size_t>{0});
    }
    SECTION("a record whose ring head is past the trace's events counts them all") {
        const ProcessModel model = build_model("trace.bin", parse(leak_then_slow_exit(300, 5000)));
        CHECK(model.program_events == 118);
        REQUIRE(model.leak_sites.size() == 1);
        CHECK_FALSE(model.leak_sites[0].growing);
    }
}

TEST_CASE("the reports show when finalization began, and only where it was recorded") {
    ReportOptions options;
    std::vector<ProcessReport> reports;
    reports.push_back(report_of(parse(leak_then_slow_exit(300))));
    CHECK(reports[0].diagnosis.kind == DiagnosisKind::Leak);
    CHECK_THAT(render_text(reports, options),
               Catch::Contains(
                   "  ended      exited with status 0 after 3.0 s\n"
                   "  python     finalization began at 0.3 s: growth is judged on the events before it\n"));
    nlohmann::json json = render_json(reports, options);
    CHECK(json["processes"][0]["python_finalizing_s"] == 0.3);
    CHECK(json["processes"][0]["duration_s"] == 3.0);

    reports.clear();
    reports.push_back(report_of(parse(leak_then_slow_exit(std::nullopt))));
    CHECK(reports[0].diagnosis.kind == DiagnosisKind::Stable);
    CHECK_THAT(render_text(reports, options), !Catch::Contains("finalization"));
    json = render_json(reports, options);
    CHECK_FALSE(json["processes"][0].contains("python_finalizing_s"));
}

TEST_CASE("host RAM growth is judged on the RSS sampled before Python's finalization") {
    // No GPU memory held; RSS went from 100 MiB to 900 MiB while the program ran, and back when the
    // teardown freed it.
    const auto rss_trace = [](std::optional<uint64_t> finalizing_ms) {
        TraceBuilder builder(TraceLayout{.notable_capacity = 8});
        builder.header().start_monotonic_ns = kStart;
        const uint64_t samples[][2] = {{0, 100}, {100, 300}, {200, 600}, {280, 900}, {2990, 100}};
        for (uint64_t slot = 0; slot < std::size(samples); ++slot) {
            format::TimelineSample sample{};
            sample.commit = slot + 1;
            sample.time_ns = kStart + samples[slot][0] * kMillisecond;
            sample.rss_bytes = samples[slot][1] * kMiB;
            builder.set_timeline(slot, sample);
        }
        builder.header().timeline_samples = std::size(samples);
        if (finalizing_ms)
            builder.add_notable(python_finalizing(kStart + *finalizing_ms * kMillisecond));
        builder.end_exited(0, kStart + 3000 * kMillisecond);
        return builder;
    };
    SECTION("with the record, the sample before it") {
        const ProcessReport report = report_of(parse(rss_trace(300)));
        CHECK(report.model.host.last()->rss == 100 * kMiB);
        CHECK(code_end_host_point(report.model)->rss == 900 * kMiB);
        CHECK(report.diagnosis.kind == DiagnosisKind::HostRamGrowth);
        CHECK_THAT(diagnosis_text(report.model, report.diagnosis, *report.stacks),
                   Catch::Contains("grew from 100.0 MiB to 900.0 MiB through its work, from 0.0 s to 0.3 s "
                                   "before Python finalized"));
    }
    SECTION("without it, the sample at exit") {
        const ProcessReport report = report_of(parse(rss_trace(std::nullopt)));
        CHECK(code_end_host_point(report.model) == report.model.host.last());
        CHECK(report.diagnosis.kind == DiagnosisKind::Stable);
    }
}
