// The recorder as the hooks drive it: one process-wide trace written by many threads. Each test case
// runs in a process of its own (ctest starts the binary once per case), so each gets a fresh recorder.
#include <catch2/catch.hpp>

#include <atomic>
#include <cstdio>
#include <map>
#include <thread>
#include <unistd.h>
#include <vector>

#include "recorder_test_support.h"
#include "recording/trace_writer.h"

using gpuleak::Allocation;
using gpuleak::KeySpace;
using gpuleak::MemoryKind;
using gpuleak::analyzer::TraceReader;
using gpuleak::format::EventType;

#ifndef GPULEAK_TEST_PAIRS_PER_THREAD
#define GPULEAK_TEST_PAIRS_PER_THREAD 20000
#endif

using namespace recorder_test;

TEST_CASE("threads recording at once lose nothing and leave the exact live set") {
    TempDir dir;
    const std::string path = start_recording_into(dir);
    constexpr int kThreads = 8;
    constexpr uint64_t kPairs = GPULEAK_TEST_PAIRS_PER_THREAD;
    constexpr uint64_t kKept = 5;
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
        threads.emplace_back([t] {
            const uint64_t base = (static_cast<uint64_t>(t) + 1) << 40;
            for (uint64_t i = 0; i < kPairs; ++i) {
                gpuleak::record_alloc(device_allocation(base + (i % 1000) * 512, 512));
                gpuleak::record_free(KeySpace::Pointer, base + (i % 1000) * 512, 0, 0);
            }
            for (uint64_t i = 0; i < kKept; ++i)
                gpuleak::record_alloc(device_allocation(base + 0x100000 + i * 4096, 4096 + i));
        });
    }
    for (std::thread& thread : threads)
        thread.join();

    TraceReader reader = TraceReader::open(path);
    const auto& header = reader.header();
    CHECK(header.counters.ring_head == kThreads * (kPairs * 2 + kKept));
    CHECK(header.counters.free_unknown == 0);
    CHECK(header.counters.live_untracked == 0);
    CHECK(reader.events().torn == 0);
    CHECK(reader.events().events.size() + reader.events().dropped == header.counters.ring_head);

    std::map<uint64_t, uint64_t> expected;
    uint64_t expected_bytes = 0;
    for (int t = 0; t < kThreads; ++t) {
        for (uint64_t i = 0; i < kKept; ++i) {
            expected[((static_cast<uint64_t>(t) + 1) << 40) + 0x100000 + i * 4096] = 4096 + i;
            expected_bytes += 4096 + i;
        }
    }
    CHECK(live_of(reader) == expected);
    CHECK(header.accounting.live_bytes[0][static_cast<int>(MemoryKind::Device)] == expected_bytes);
    CHECK(header.accounting.peak_bytes[0][static_cast<int>(MemoryKind::Device)] >= expected_bytes);
}

TEST_CASE("preparing the ring's pages ahead of the head changes no event appended meanwhile") {
    // The sampler writes to one slot of each page ahead of the head on every lap after the first,
    // while threads append: here as fast as they can, round a small ring many times.
    TempDir dir;
    gpuleak::Config config = gpuleak::read_config();
    std::snprintf(config.output_pattern, sizeof config.output_pattern, "%s",
                  (dir.path() + "/t.trace").c_str());
    config.max_bytes = gpuleak::kMinMaxMb << 20;
    gpuleak::TraceWriter writer;
    REQUIRE(writer.create(config, {1, 0, ""}));
    const uint64_t capacity = writer.header()->ring_capacity;
    const uint64_t total = 8 * capacity + 123;
    std::atomic<bool> appending{true};
    std::thread sampler([&] {
        while (appending.load(std::memory_order_relaxed))
            writer.prepare_ring_ahead();
    });
    for (uint64_t i = 0; i < total; ++i) {
        gpuleak::format::EventRecord event{};
        event.type = static_cast<uint16_t>(EventType::Alloc);
        event.address = i;
        event.size = i * 3 + 1;
        writer.append_event(event);
    }
    appending.store(false, std::memory_order_relaxed);
    sampler.join();

    TraceReader reader = TraceReader::open(writer.path());
    const auto& log = reader.events();
    CHECK(log.torn == 0);
    REQUIRE(log.events.size() == capacity);
    for (const auto& event : log.events) {
        REQUIRE(event.address == event.sequence);
        REQUIRE(event.size == event.sequence * 3 + 1);
    }
    CHECK(log.events.back().sequence == total - 1);
}

TEST_CASE("every allocation carries its stack and device and thread") {
    TempDir dir;
    const std::string path = start_recording_into(dir);
    gpuleak::record_alloc(device_allocation(0x7000, 100, 2));
    gpuleak::record_alloc({MemoryKind::PinnedHost, 0x9000, 64, gpuleak::kHostDevice, 0, 5});
    TraceReader reader = TraceReader::open(path);
    const auto& live = reader.live_allocations().allocations;
    REQUIRE(live.size() == 2);
    for (const auto& allocation : live) {
        REQUIRE(reader.stacks().count(allocation.stack_id) == 1);
        CHECK(!reader.stacks().at(allocation.stack_id).empty());
        CHECK(allocation.thread_id == static_cast<uint32_t>(gettid()));
    }
    const auto& header = reader.header();
    CHECK(header.accounting.live_bytes[2][static_cast<int>(MemoryKind::Device)] == 100);
    CHECK(
        header.accounting.live_bytes[gpuleak::format::kHostSlot][static_cast<int>(MemoryKind::PinnedHost)] ==
        64);
    CHECK(!reader.modules().empty());
}

TEST_CASE("failures and markers are kept as notable events") {
    TempDir dir;
    const std::string path = start_recording_into(dir);
    gpuleak::record_marker("epoch 1");
    gpuleak::record_alloc_failure(device_allocation(0, 1ull << 40), 2, 12345);
    gpuleak::record_free(KeySpace::Pointer, 0xdead000, 0, 0);
    TraceReader reader = TraceReader::open(path);
    const auto& notable = reader.notable_events().events;
    REQUIRE(notable.size() == 2);
    CHECK(notable[0].type == EventType::Marker);
    CHECK(reader.strings().at(static_cast<uint32_t>(notable[0].address)) == "epoch 1");
    CHECK(notable[1].type == EventType::AllocFailed);
    CHECK(notable[1].size == 1ull << 40);
    CHECK(notable[1].result == 2);
    CHECK(notable[1].address == 12345); // the driver's free memory then
    CHECK(notable[1].stack_id != 0);
    CHECK(reader.header().counters.free_unknown == 1);
}

TEST_CASE("the driver's view of device memory keeps its lowest free and its latest") {
    TempDir dir;
    const std::string path = start_recording_into(dir);
    gpuleak::record_device_memory(1, 700, 1000);
    gpuleak::record_device_memory(1, 300, 1000);
    gpuleak::record_device_memory(1, 500, 1000);
    gpuleak::record_device_memory(-1, 1, 2); // the host has no such view
    TraceReader reader = TraceReader::open(path);
    const auto& view = reader.header().device_memory[1];
    CHECK(view.total_bytes == 1000);
    CHECK(view.lowest_free_bytes == 300);
    CHECK(view.last_free_bytes == 500);
    CHECK(reader.header().device_memory[0].total_bytes == 0);
}

TEST_CASE("a VMM range release frees every mapping inside it") {
    TempDir dir;
    const std::string path = start_recording_into(dir);
    for (uint64_t i = 0; i < 4; ++i)
        gpuleak::record_alloc({MemoryKind::VmmMapping, 0x10000000 + i * 0x200000, 0x200000, 0, 0, 0});
    gpuleak::record_free_range(KeySpace::VmmRange, 0x10000000, 3 * 0x200000, 0);
    TraceReader reader = TraceReader::open(path);
    REQUIRE(reader.live_allocations().allocations.size() == 1);
    CHECK(reader.live_allocations().allocations[0].address == 0x10000000 + 3 * 0x200000);
}
