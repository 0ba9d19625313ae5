// The fields an event type gives another meaning, read back by that meaning from records made as the
// recorder makes them (interpose/recorder.cpp).
#include <catch2/catch.hpp>

#include "read/event_record.h"
#include "read/trace_reader.h"

using gpuleak::analyzer::decode_event;
using gpuleak::analyzer::Event;
using gpuleak::analyzer::LiveAllocation;
namespace format = gpuleak::format;

namespace {

format::EventRecord record_of(format::EventType type, format::MemoryKind kind) {
    format::EventRecord record{};
    record.type = static_cast<uint16_t>(type);
    record.kind = static_cast<uint8_t>(kind);
    record.size = 4096;
    return record;
}

Event fork_of(uint64_t child, format::ForkOrigin origin) {
    format::EventRecord record = record_of(format::EventType::Fork, format::MemoryKind::None);
    record.address = child;
    record.result = static_cast<int32_t>(origin);
    return decode_event(record, 0);
}

Event failure_with_free_bytes(uint64_t free_bytes) {
    format::EventRecord record = record_of(format::EventType::AllocFailed, format::MemoryKind::Device);
    record.address = free_bytes;
    return decode_event(record, 0);
}

Event with_stream_field(format::EventType type, format::MemoryKind kind, uint64_t stream) {
    format::EventRecord record = record_of(type, kind);
    record.stream = stream;
    return decode_event(record, 0);
}

} // namespace

TEST_CASE("a fork's record names the child's pid and what forked it, where they are valid") {
    const Event worker = fork_of(4242, format::ForkOrigin::DataLoader);
    CHECK(worker.fork_child_pid() == 4242);
    CHECK(worker.fork_origin() == format::ForkOrigin::DataLoader);
    CHECK(fork_of(1, format::ForkOrigin::Multiprocessing).fork_origin() ==
          format::ForkOrigin::Multiprocessing);

    const Event corrupt = fork_of(uint64_t{INT32_MAX} + 1, static_cast<format::ForkOrigin>(7));
    CHECK_FALSE(corrupt.fork_child_pid());
    CHECK(corrupt.fork_origin() == format::ForkOrigin::Unknown);
}

TEST_CASE("a failed allocation's record gives the free bytes the driver said, where it was asked") {
    CHECK(failure_with_free_bytes(1 << 20).free_bytes_then() == uint64_t{1} << 20);
    CHECK(failure_with_free_bytes(0).free_bytes_then() == 0u);
    CHECK_FALSE(failure_with_free_bytes(UINT64_MAX).free_bytes_then());
}

TEST_CASE("the stream field is a stream only where it holds one") {
    const Event on_stream =
        with_stream_field(format::EventType::AllocFailed, format::MemoryKind::AsyncPool, 0x77);
    CHECK_FALSE(on_stream.refused_by_allocator());
    CHECK(on_stream.call_stream() == 0x77);
    CHECK(with_stream_field(format::EventType::Alloc, format::MemoryKind::Block, 0x77).call_stream() == 0x77);

    // A sub-allocator's refusal holds the failed allocations it gave up after.
    const Event refusal = with_stream_field(format::EventType::AllocFailed, format::MemoryKind::Block, 3);
    CHECK(refusal.refused_by_allocator());
    CHECK(refusal.failures_given_up_after() == 3);
    CHECK(refusal.call_stream() == 0);

    // A mapping's holds the handle it maps, in its events and as a live allocation.
    CHECK(with_stream_field(format::EventType::Alloc, format::MemoryKind::VmmMapping, 0x55).call_stream() ==
          0);
    const LiveAllocation mapping{.stream = 0x55, .kind = format::MemoryKind::VmmMapping};
    CHECK(mapping.mapped_handle() == 0x55);
    CHECK(mapping.call_stream() == 0);
    const LiveAllocation on_stream_live{.stream = 0x77, .kind = format::MemoryKind::AsyncPool};
    CHECK(on_stream_live.call_stream() == 0x77);
}
