// The failures the model lists: a sub-allocator's refusal takes the place of the failed CUDA allocations
// its thread gave up after, and only of those.
#include <catch2/catch.hpp>

#include "in_memory_report.h"
#include "model/process_model.h"
#include "read/trace_reader.h"
#include "render/diagnosis_text.h"
#include "render/render_json.h"
#include "render/render_text.h"
#include "trace_builder.h"

namespace format = gpuleak::format;
using gpuleak::analyzer::build_model;
using gpuleak::analyzer::FailureSummary;
using gpuleak::analyzer::TraceReader;
using gpuleak::test::TraceBuilder;
using gpuleak::test::TraceLayout;

namespace {

format::EventRecord failure(format::MemoryKind kind, uint64_t size, uint32_t thread, int16_t device,
                            uint64_t time_ns) {
    format::EventRecord record{};
    record.time_ns = time_ns;
    record.size = size;
    record.address = 1000 + time_ns; // free bytes
    record.thread_id = thread;
    record.device = device;
    record.type = static_cast<uint16_t>(format::EventType::AllocFailed);
    record.kind = static_cast<uint8_t>(kind);
    record.result = 2;
    return record;
}

format::EventRecord refusal(uint64_t size, uint32_t thread, int16_t device, uint64_t time_ns,
                            uint64_t gave_up_after, uint64_t free_bytes) {
    format::EventRecord record = failure(format::MemoryKind::Block, size, thread, device, time_ns);
    record.result = format::kAllocatorRefused;
    record.stream = gave_up_after;
    record.address = free_bytes;
    return record;
}

std::vector<FailureSummary> failures_of(TraceBuilder& builder) {
    const TraceReader trace = TraceReader::parse(builder.bytes(), "trace.bin");
    return build_model("trace.bin", trace).failures;
}

} // namespace

TEST_CASE("a refusal after failed CUDA allocations on its thread and device is one failure") {
    TraceBuilder builder(TraceLayout{.notable_capacity = 8});
    builder.add_notable(failure(format::MemoryKind::Device, 20, 1, 0, 10));
    builder.add_notable(failure(format::MemoryKind::Device, 30, 2, 0, 11)); // another thread's
    builder.add_notable(failure(format::MemoryKind::Device, 20, 1, 0, 12));
    builder.add_notable(refusal(18, 1, 0, 13, 2, UINT64_MAX));
    const std::vector<FailureSummary> failures = failures_of(builder);
    REQUIRE(failures.size() == 2);
    CHECK(failures[0].bytes == 30);
    CHECK(!failures[0].allocator_refused);
    CHECK(failures[0].failed_cuda_allocations == 1);
    const FailureSummary& refused = failures[1];
    CHECK(refused.allocator_refused);
    CHECK(refused.kind == format::MemoryKind::Block);
    CHECK(refused.bytes == 18);
    CHECK(refused.failed_cuda_allocations == 2);
    CHECK(refused.error == 2);
    CHECK(refused.free_bytes == 1012); // the last cudaMalloc's, as the allocator did not say
}

TEST_CASE("a refusal takes only the failures since its thread's last refusal or other device") {
    TraceBuilder builder(TraceLayout{.notable_capacity = 8});
    builder.add_notable(failure(format::MemoryKind::Device, 20, 1, 0, 10));
    builder.add_notable(refusal(18, 1, 0, 11, 1, 5000));
    builder.add_notable(failure(format::MemoryKind::Device, 20, 1, 0, 12));
    builder.add_notable(failure(format::MemoryKind::Device, 20, 1, 1, 13));
    builder.add_notable(failure(format::MemoryKind::Device, 20, 1, 0, 14));
    builder.add_notable(refusal(18, 1, 0, 15, 3, 6000)); // says more than the trace holds: takes one
    const std::vector<FailureSummary> failures = failures_of(builder);
    REQUIRE(failures.size() == 4);
    CHECK(failures[0].allocator_refused);
    CHECK(failures[0].time_ns == 11);
    CHECK(failures[0].free_bytes == 5000);
    CHECK(failures[1].time_ns == 12);
    CHECK(failures[2].device == 1);
    CHECK(failures[3].allocator_refused);
    CHECK(failures[3].free_bytes == 6000);
}

TEST_CASE("a refusal by the allocator's own limit leaves earlier failures alone") {
    TraceBuilder builder(TraceLayout{.notable_capacity = 8});
    builder.add_notable(failure(format::MemoryKind::Device, 20, 1, 0, 10));
    builder.add_notable(refusal(18, 1, 0, 14, 0, 5000));
    const std::vector<FailureSummary> failures = failures_of(builder);
    REQUIRE(failures.size() == 2);
    CHECK(!failures[0].allocator_refused);
    CHECK(failures[1].allocator_refused);
    CHECK(failures[1].failed_cuda_allocations == 0);
    CHECK(failures[1].error == format::kAllocatorRefused);
    CHECK(failures[1].free_bytes == 5000);
}

TEST_CASE("an allocation refused for a bad argument is not out of memory, and is named by its error") {
    TraceBuilder builder(TraceLayout{.notable_capacity = 8});
    format::EventRecord invalid = failure(format::MemoryKind::PinnedHost, 1 << 30, 1, 0, 10);
    invalid.result = 1; // cudaErrorInvalidValue: flags cudaHostAlloc does not know
    builder.add_notable(invalid);
    builder.add_notable(failure(format::MemoryKind::Device, 1 << 20, 1, 0, 20));
    const gpuleak::analyzer::TraceReader trace = TraceReader::parse(builder.bytes(), "trace.bin");
    gpuleak::analyzer::ReportSet set;
    std::vector<gpuleak::analyzer::ProcessReport>& reports = set.all();
    reports.push_back(gpuleak::test::report_of(trace));
    const gpuleak::analyzer::ProcessReport& report = reports[0];
    REQUIRE(report.model.failures.size() == 2);
    CHECK_FALSE(report.model.failures[0].out_of_memory());
    CHECK(report.model.failures[1].out_of_memory());
    // The larger request failed for its argument: the out-of-memory one is what the diagnosis names.
    CHECK(report.diagnosis.largest_failure == 1);
    const gpuleak::analyzer::ReportOptions options;
    const std::string text = gpuleak::analyzer::render_text(set, options);
    const std::string diagnosis =
        gpuleak::analyzer::diagnosis_text(report.model, report.diagnosis, *reports[0].stacks);
    CHECK_THAT(diagnosis,
               Catch::Contains("1 allocation failed (out of memory); the largest asked for 1.0 MiB"));
    CHECK_THAT(diagnosis, Catch::EndsWith(" 1 allocation failed for another reason than memory: error 1 "
                                          "(invalid value)."));
    CHECK_THAT(text, Catch::Contains("at 0.00 s, error 1 (invalid value)"));
    CHECK_THAT(text, Catch::Contains("error 2 (out of memory)"));
    const nlohmann::json json = gpuleak::analyzer::render_json(set, options)["processes"][0]["failures"];
    CHECK(json[0]["out_of_memory"] == false);
    CHECK(json[0]["error_meaning"] == "invalid value");
    CHECK(json[1]["out_of_memory"] == true);
}
