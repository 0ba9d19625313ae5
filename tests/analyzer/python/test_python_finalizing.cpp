// The start of Python's finalization (format 6, EventType::PythonFinalizing): the record read back, a
// torn one ignored, growth judged on the events before it, and how the reports show it.
#include <catch2/catch.hpp>

#include "in_memory_report.h"
#include "model/diagnosis.h"
#include "model/process_model.h"
#include "read/trace_reader.h"
#include "render/diagnosis_text.h"
#include "render/render_json.h"
#include "render/render_text.h"
#include "report/report.h"
#include "report/symbolized_stacks.h"
#include "trace_builder.h"

#include <map>

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
    // Both called from the same loop of main (0x400100).
    builder.add_stack(1, {0x401000, 0x400100});
    builder.add_stack(2, {0x402000, 0x400100});
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
    gpuleak::analyzer::ReportSet set;
    std::vector<ProcessReport>& reports = set.all();
    reports.push_back(report_of(parse(leak_then_slow_exit(300))));
    CHECK(reports[0].diagnosis.kind == DiagnosisKind::Leak);
    CHECK_THAT(render_text(set, options),
               Catch::Contains(
                   "  ended      exited with status 0 after 3.0 s; its code ended at 0.3 s, as Python began "
                   "finalizing\n"));
    nlohmann::json json = render_json(set, options);
    CHECK(json["processes"][0]["python_finalizing_s"] == 0.3);
    CHECK(json["processes"][0]["duration_s"] == 3.0);
    // The steps' times as precisely as the site's own line gives them.
    CHECK_THAT(json["processes"][0]["diagnosis"]["text"].get<std::string>(),
               Catch::Contains("through 83% of the program's work (0.00 s to 0.25 s)"));

    reports.clear();
    reports.push_back(report_of(parse(leak_then_slow_exit(std::nullopt))));
    CHECK(reports[0].diagnosis.kind == DiagnosisKind::Stable);
    CHECK_THAT(render_text(set, options), !Catch::Contains("Python began finalizing"));
    json = render_json(set, options);
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

namespace {

struct Made {
    format::EventType type;
    format::MemoryKind kind;
    uint64_t address;
    uint64_t size;
    uint32_t stack;
    uint64_t stream = 0; // a mapping's: the handle it maps
};

// The events `before` the program's code ended and `after` it, in order, each at its own millisecond;
// `live` are those live at the end of the trace.
TraceReader exit_frees(const std::vector<Made>& before, const std::vector<Made>& after,
                       const std::vector<Made>& live = {}) {
    TraceBuilder builder(TraceLayout{.ring_capacity = 64, .notable_capacity = 8});
    builder.header().start_monotonic_ns = kStart;
    for (uint32_t stack = 1; stack <= 8; ++stack)
        builder.add_stack(stack, {0x400000 + stack * 0x1000});
    uint64_t time_ns = kStart;
    // The sequence number of each allocation's event, for the live slots.
    std::map<std::pair<uint64_t, format::MemoryKind>, uint64_t> sequences;
    const auto append = [&](const Made& made) {
        if (made.type == format::EventType::Alloc)
            sequences[{made.address, made.kind}] = builder.header().ring_head;
        format::EventRecord record = event_of(made.type, made.address, time_ns += kMillisecond);
        record.kind = static_cast<uint8_t>(made.kind);
        record.size = made.size;
        record.stack_id = made.stack;
        record.stream = made.stream;
        builder.append_event(record);
    };
    for (const Made& made : before)
        append(made);
    format::EventRecord finalizing = python_finalizing(time_ns += kMillisecond);
    finalizing.size = builder.header().ring_head;
    builder.add_notable(finalizing);
    for (const Made& made : after)
        append(made);
    for (size_t i = 0; i < live.size(); ++i) {
        format::LiveSlot slot{};
        slot.state = format::kSlotLive;
        slot.address = live[i].address;
        slot.size = live[i].size;
        slot.kind = static_cast<uint8_t>(live[i].kind);
        slot.stack_id = live[i].stack;
        slot.stream = live[i].stream;
        slot.sequence = sequences[{live[i].address, live[i].kind}];
        slot.time_ns = kStart;
        builder.set_live(i, slot);
    }
    builder.end_exited(0, time_ns + kMillisecond);
    return TraceReader::parse(builder.bytes(), "trace.bin");
}

const LeakSite* site_of_stack(const ProcessModel& model, uint32_t stack) {
    const auto found = std::find_if(model.leak_sites.begin(), model.leak_sites.end(),
                                    [&](const LeakSite& site) { return site.stack_id == stack; });
    return found == model.leak_sites.end() ? nullptr : &*found;
}

constexpr auto kAlloc = format::EventType::Alloc;
constexpr auto kFree = format::EventType::Free;
constexpr auto kDevice = format::MemoryKind::Device;

} // namespace

TEST_CASE("what the program's code left live counts as live, though its exit freed it") {
    SECTION("an allocation freed after the code ended, beside one live at the end") {
        const TraceReader trace =
            exit_frees({{kAlloc, kDevice, 0x1000, kMiB, 1}, {kAlloc, kDevice, 0x2000, 2 * kMiB, 2}},
                       {{kFree, kDevice, 0x2000, 2 * kMiB, 2}}, {{kAlloc, kDevice, 0x1000, kMiB, 1}});
        const ProcessModel model = build_model("trace.bin", trace);
        REQUIRE(model.leak_sites.size() == 2);
        const LeakSite* freed = site_of_stack(model, 2);
        REQUIRE(freed != nullptr);
        CHECK(freed->bytes == 2 * kMiB);
        CHECK(freed->freed_at_exit == 2 * kMiB);
        CHECK(site_of_stack(model, 1)->freed_at_exit == 0);
        CHECK(model.warnings.empty());
    }
    SECTION("what was made and freed after the end, or freed before it, does not count") {
        const TraceReader trace =
            exit_frees({{kAlloc, kDevice, 0x3000, kMiB, 3}, {kFree, kDevice, 0x3000, kMiB, 3}},
                       {{kAlloc, kDevice, 0x3000, kMiB, 4}, {kFree, kDevice, 0x3000, kMiB, 4}});
        const ProcessModel model = build_model("trace.bin", trace);
        CHECK(model.leak_sites.empty());
        CHECK(model.warnings.empty());
    }
    SECTION("an address used twice before the end counts its latest allocation") {
        const TraceReader trace = exit_frees({{kAlloc, kDevice, 0x4000, kMiB, 5},
                                              {kFree, kDevice, 0x4000, kMiB, 5},
                                              {kAlloc, kDevice, 0x4000, 3 * kMiB, 6}},
                                             {{kFree, kDevice, 0x4000, 3 * kMiB, 6}});
        const ProcessModel model = build_model("trace.bin", trace);
        REQUIRE(model.leak_sites.size() == 1);
        CHECK(model.leak_sites[0].stack_id == 6);
        CHECK(model.leak_sites[0].bytes == 3 * kMiB);
    }
    SECTION("a block and the segment holding it, at one address, are told apart by kind") {
        const TraceReader trace = exit_frees({{kAlloc, format::MemoryKind::Device, 0x5000, 4 * kMiB, 7},
                                              {kAlloc, format::MemoryKind::Block, 0x5000, kMiB, 8}},
                                             {{kFree, format::MemoryKind::Block, 0x5000, kMiB, 8}},
                                             {{kAlloc, format::MemoryKind::Device, 0x5000, 4 * kMiB, 7}});
        const ProcessModel model = build_model("trace.bin", trace);
        const LeakSite* block = site_of_stack(model, 8);
        REQUIRE(block != nullptr);
        CHECK(block->kind == format::MemoryKind::Block);
        CHECK(block->freed_at_exit == kMiB);
        CHECK(site_of_stack(model, 7)->freed_at_exit == 0);
    }
    SECTION("a free whose allocation the ring lost is said, and pairs with no older allocation") {
        // The allocation of the last free is missing (torn, or overwritten): the older one was freed.
        const TraceReader trace =
            exit_frees({{kAlloc, kDevice, 0x6000, kMiB, 1}, {kFree, kDevice, 0x6000, kMiB, 1}},
                       {{kFree, kDevice, 0x6000, kMiB, 2}});
        const ProcessModel model = build_model("trace.bin", trace);
        CHECK(model.leak_sites.empty());
        REQUIRE(model.warnings.size() == 1);
        CHECK_THAT(model.warnings[0],
                   Catch::Contains("1 allocation freed after the program's code ended was made "
                                   "before the oldest event the ring still holds"));
    }
}

TEST_CASE("physical memory is placed where it is mapped, the address the program's objects hold") {
    constexpr auto kPhysical = format::MemoryKind::VmmPhysical;
    constexpr auto kMapping = format::MemoryKind::VmmMapping;
    constexpr uint64_t kHeld = 0x9;  // a handle, live at the end
    constexpr uint64_t kFreed = 0xa; // one its exit released
    const Made held{kAlloc, kPhysical, kHeld, 2 * kMiB, 3};
    const Made held_mapping{kAlloc, kMapping, 0x7f0000200000, 2 * kMiB, 3, kHeld};
    const Made freed{kAlloc, kPhysical, kFreed, 2 * kMiB, 3};
    const Made freed_mapping{kAlloc, kMapping, 0x7f0000600000, 2 * kMiB, 3, kFreed};
    const Made unmapped{kAlloc, kPhysical, 0xb, 2 * kMiB, 4};
    const TraceReader trace =
        exit_frees({held, held_mapping, freed, freed_mapping, unmapped},
                   {{kFree, kMapping, 0x7f0000600000, 2 * kMiB, 3}, {kFree, kPhysical, kFreed, 2 * kMiB, 3}},
                   {held, held_mapping, unmapped});
    const ProcessModel model = build_model("trace.bin", trace);
    const LeakSite* mapped = site_of_stack(model, 3);
    REQUIRE(mapped != nullptr);
    CHECK(mapped->kind == kPhysical);
    CHECK(mapped->bytes == 4 * kMiB);
    CHECK(mapped->blocks == std::vector<LiveBlock>{{0x7f0000200000, 2 * kMiB}, {0x7f0000600000, 2 * kMiB}});
    // Memory mapped nowhere has no address of its own: its handle stands for it.
    const LeakSite* unmapped_site = site_of_stack(model, 4);
    REQUIRE(unmapped_site != nullptr);
    CHECK(unmapped_site->blocks == std::vector<LiveBlock>{{0xb, 2 * kMiB}});
}

TEST_CASE("a handle the driver hands out again does not take the mappings of the memory it named before") {
    constexpr auto kPhysical = format::MemoryKind::VmmPhysical;
    constexpr auto kMapping = format::MemoryKind::VmmMapping;
    constexpr uint64_t kHandle = 0xc;
    // Created, mapped and released at once (the mapping keeps the memory), then the handle's value again.
    const Made mapping{kAlloc, kMapping, 0x7f0000800000, 2 * kMiB, 5, kHandle};
    const Made again{kAlloc, kPhysical, kHandle, 4 * kMiB, 6};
    const TraceReader trace = exit_frees(
        {{kAlloc, kPhysical, kHandle, 2 * kMiB, 5}, mapping, {kFree, kPhysical, kHandle, 2 * kMiB, 5}, again},
        {}, {mapping, again});
    const ProcessModel model = build_model("trace.bin", trace);
    const LeakSite* reused = site_of_stack(model, 6);
    REQUIRE(reused != nullptr);
    CHECK(reused->blocks == std::vector<LiveBlock>{{kHandle, 4 * kMiB}});
}
