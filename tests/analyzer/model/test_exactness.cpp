// What makes a report less than exact, and what stays exact. Allocations past the live table, counted
// by site (format::SpillSite), are in the sites and the totals, in the timeline the replay makes, and
// judged growing by the stretches of events they were made in; what the trace had no room for is said
// beside the figures.
#include <catch2/catch.hpp>

#include "model/diagnosis.h"
#include "model/process_model.h"
#include "read/trace_reader.h"
#include "render/diagnosis_text.h"
#include "trace_builder.h"

using namespace gpuleak::analyzer;
using gpuleak::test::TraceBuilder;
using gpuleak::test::TraceLayout;
namespace format = gpuleak::format;

namespace {

constexpr uint64_t kStart = 1000;
constexpr uint64_t kBlock = 512;
constexpr uint64_t kEvents = 1600; // 16 buckets of 100, as if merged so

// A program of kEvents events that holds, at stack 1, blocks no slot of the live table had room for:
// `per_bucket[i]` of them made in the i-th sixteenth of its events, the last of them also in the ring.
TraceBuilder spilled_program(const std::vector<uint64_t>& per_bucket) {
    TraceBuilder builder(TraceLayout{.ring_capacity = 4, .spill_capacity = 4});
    format::FileHeader& header = builder.header();
    header.start_monotonic_ns = kStart;
    header.ring_head = kEvents - 3;
    builder.add_stack(1, {0x401000});
    format::SpillSite site{};
    site.stack_id = 1;
    site.kind = static_cast<uint8_t>(format::MemoryKind::Block);
    site.bucket_shift = 7; // buckets of 128 events: 16 of them cover 2048
    uint64_t count = 0;
    for (size_t i = 0; i < per_bucket.size(); ++i) {
        // The sixteenths of 1600 events, as buckets of 128 would hold them: close enough for a test.
        site.buckets[i] = {per_bucket[i], kStart + i * 1000, kStart + i * 1000 + 999};
        count += per_bucket[i];
    }
    site.tally[0] = {count, count * kBlock};
    format::SpillSite unattributed{};
    unattributed.device = -2;
    builder.set_spill(0, unattributed);
    builder.set_spill(1, site);
    header.accounting.live_bytes[0][static_cast<size_t>(format::MemoryKind::Block)] = count * kBlock;
    header.accounting.peak_bytes[0][static_cast<size_t>(format::MemoryKind::Block)] = count * kBlock;
    // The ring's events: a temporary made and freed, then the last of them made, at event kEvents - 1.
    format::EventRecord temporary{};
    temporary.type = static_cast<uint16_t>(format::EventType::Alloc);
    temporary.kind = site.kind;
    temporary.address = 0x9000;
    temporary.size = 64;
    temporary.stack_id = 1;
    temporary.time_ns = kStart + 15'000;
    builder.append_event(temporary);
    temporary.type = static_cast<uint16_t>(format::EventType::Free);
    builder.append_event(temporary);
    format::EventRecord made{};
    made.type = static_cast<uint16_t>(format::EventType::Alloc);
    made.kind = site.kind;
    made.address = 0x7000;
    made.size = kBlock;
    made.stack_id = 1;
    made.time_ns = kStart + 15'999;
    builder.append_event(made);
    return builder;
}

ProcessModel model_of(const TraceBuilder& builder) {
    const std::vector<std::byte> bytes = builder.bytes();
    const TraceReader trace = TraceReader::parse(bytes, "spilled.trace");
    return build_model("spilled.trace", trace);
}

const LeakSite& block_site(const ProcessModel& model) {
    REQUIRE(model.leak_sites.size() == 1);
    return model.leak_sites.front();
}

} // namespace

TEST_CASE("blocks counted by site are the site's, and the model says so") {
    const ProcessModel model = model_of(spilled_program({3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3}));
    const LeakSite& site = block_site(model);
    CHECK(site.count == 48);
    CHECK(site.spilled == 48);
    CHECK(site.bytes == 48 * kBlock);
    CHECK(model.exactness.spilled().count == 48);
    CHECK(model.exactness.spilled().bytes == 48 * kBlock);
    CHECK_FALSE(model.exactness.lost());
    // Made through the whole run, in every stretch: growing.
    CHECK(site.growing);
    CHECK(site.first_ns == 0);
    CHECK(site.last_ns == 15'999);
}

TEST_CASE("blocks counted by site at the two ends of the run only are not growing") {
    // Made once at the start and by the last step: what a one-time allocation next to a step's looks like.
    std::vector<uint64_t> ends(16, 0);
    ends[0] = 20;
    ends[15] = 4;
    const ProcessModel model = model_of(spilled_program(ends));
    CHECK_FALSE(block_site(model).growing);
    CHECK(block_site(model).count == 24);
}

TEST_CASE("the replay takes an allocation counted by site out of its site's tally") {
    const ProcessModel model = model_of(spilled_program({1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1}));
    // Newest first as replayed, then sorted: at the end both blocks, before the newest one only one.
    REQUIRE(model.timeline.size() >= 2);
    CHECK(model.timeline.back().allocated == 2 * kBlock);
    bool one_before = false;
    for (const TimelinePoint& point : model.timeline)
        one_before |= point.allocated == kBlock;
    CHECK(one_before);
}

TEST_CASE("call stacks and notable records the trace had no room for are said beside the figures") {
    TraceBuilder builder = spilled_program({1});
    builder.header().stacks_dropped = 2;
    builder.header().notable_count = builder.header().notable_capacity + 3;
    builder.header().strings_dropped = 4;
    const ProcessModel model = model_of(builder);
    CHECK(model.exactness.stacks_dropped == 2);
    CHECK(model.exactness.notable_dropped == 3);
    CHECK(model.exactness.strings_dropped == 4);
    CHECK_FALSE(model.exactness.lost());
    const std::vector<std::string> notes = exactness_notes(model);
    REQUIRE(notes.size() == 4);
    CHECK(notes[0].starts_with("1 block (512 B) live at the end found no slot of their own"));
    CHECK(notes[1].starts_with("2 call stacks did not fit in the trace"));
    CHECK(notes[2].starts_with(
        "The last 3 failures, markers, forks, notebook cells and thread starts did not fit"));
    CHECK(notes[3].starts_with(
        "The text of 4 marker labels, notebook cells or records of what held the memory"));
}

TEST_CASE("events dropped because a signal handler recorded inside gpuleak leave no verdict, and say why") {
    TraceBuilder builder = spilled_program({1});
    builder.header().reentry_dropped = 3;
    const ProcessModel model = model_of(builder);
    CHECK(model.exactness.reentry_dropped == 3);
    CHECK(model.exactness.lost());
    const std::vector<std::string> notes = exactness_notes(model);
    REQUIRE(notes.size() == 2);
    CHECK(notes[1].starts_with("3 allocations, frees or failures were dropped: the program called gpuleak's "
                               "C API from a signal handler"));
    CHECK(diagnose(model).kind == DiagnosisKind::Incomplete);
}

TEST_CASE("markers dropped because a signal handler recorded inside gpuleak are said, the verdict stands") {
    TraceBuilder builder = spilled_program({1});
    builder.header().reentry_dropped_notes = 2;
    const ProcessModel model = model_of(builder);
    CHECK(model.exactness.reentry_dropped_notes == 2);
    CHECK_FALSE(model.exactness.lost());
    const std::vector<std::string> notes = exactness_notes(model);
    REQUIRE(notes.size() == 2);
    CHECK(notes[1] ==
          "2 markers or source names made from a signal handler that interrupted gpuleak on the same "
          "thread were dropped.");
    CHECK(diagnose(model).kind != DiagnosisKind::Incomplete);
}
