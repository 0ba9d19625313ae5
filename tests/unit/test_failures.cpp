// The failures the model lists: a sub-allocator's refusal takes the place of the failed CUDA allocations
// its thread gave up after, and only of those.
#include <catch2/catch.hpp>

#include "process_model.h"
#include "trace_builder.h"
#include "trace_reader.h"

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
