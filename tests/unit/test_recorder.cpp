// The recorder as the hooks drive it: one process-wide trace, many threads, fork and exit. Each test
// case runs in a process of its own (ctest starts the binary once per case), so each gets a fresh
// recorder.
#include <catch2/catch.hpp>

#include <csignal>
#include <cstdlib>
#include <map>
#include <set>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>
#include <vector>

#include "recorder.h"
#include "temp_dir.h"
#include "trace_reader.h"

using gpuleak::Allocation;
using gpuleak::KeySpace;
using gpuleak::MemoryKind;
using gpuleak::analyzer::TraceReader;
using gpuleak::format::EventType;

#ifndef GPULEAK_TEST_PAIRS_PER_THREAD
#define GPULEAK_TEST_PAIRS_PER_THREAD 20000
#endif

namespace {

std::string start_recording_into(const TempDir& dir) {
    setenv("GPULEAK_OUTPUT", (dir.path() + "/trace.%p").c_str(), 1);
    setenv("GPULEAK_QUIET", "1", 1);
    setenv("GPULEAK_STACK_DEPTH", "16", 1);
    REQUIRE(gpuleak::recording_active());
    return gpuleak::trace_path();
}

Allocation device_allocation(uint64_t address, uint64_t size, int16_t device = 0) {
    return Allocation{MemoryKind::Device, address, size, device, 0, 0};
}

std::map<uint64_t, uint64_t> live_of(const TraceReader& reader) {
    std::map<uint64_t, uint64_t> live;
    for (const auto& allocation : reader.live_allocations().allocations)
        live[allocation.address] = allocation.size;
    return live;
}

} // namespace

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
    CHECK(header.counters.live_overflow == 0);
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
    CHECK(header.accounting.live_bytes[gpuleak::format::kHostSlot][static_cast<int>(MemoryKind::PinnedHost)] ==
          64);
    CHECK(!reader.modules().empty());
}

TEST_CASE("failures and markers are kept as notable events") {
    TempDir dir;
    const std::string path = start_recording_into(dir);
    gpuleak::record_marker("epoch 1");
    gpuleak::record_alloc_failure(device_allocation(0, 1ull << 40), 2);
    gpuleak::record_free(KeySpace::Pointer, 0xdead000, 0, 0);
    TraceReader reader = TraceReader::open(path);
    const auto& notable = reader.notable_events().events;
    REQUIRE(notable.size() == 2);
    CHECK(notable[0].type == EventType::Marker);
    CHECK(reader.strings().at(static_cast<uint32_t>(notable[0].address)) == "epoch 1");
    CHECK(notable[1].type == EventType::AllocFailed);
    CHECK(notable[1].size == 1ull << 40);
    CHECK(notable[1].result == 2);
    CHECK(notable[1].stack_id != 0);
    CHECK(reader.header().counters.free_unknown == 1);
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

TEST_CASE("a forked child writes its own trace and never its parent's") {
    TempDir dir;
    const std::string parent_path = start_recording_into(dir);
    gpuleak::record_alloc(device_allocation(0x1000, 10));
    pid_t child = fork();
    REQUIRE(child >= 0);
    if (child == 0) {
        gpuleak::record_alloc(device_allocation(0x2000, 20));
        gpuleak::record_alloc(device_allocation(0x3000, 30));
        gpuleak::record_free(KeySpace::Pointer, 0x1000, 0, 0); // the parent's: not the child's to free
        std::exit(gpuleak::trace_path() != parent_path ? 3 : 4);
    }
    int status = 0;
    REQUIRE(waitpid(child, &status, 0) == child);
    REQUIRE(WIFEXITED(status));
    REQUIRE(WEXITSTATUS(status) == 3);

    TraceReader parent = TraceReader::open(parent_path);
    CHECK(live_of(parent) == std::map<uint64_t, uint64_t>{{0x1000, 10}});
    TraceReader child_trace = TraceReader::open(dir.path() + "/trace." + std::to_string(child));
    CHECK(live_of(child_trace) == std::map<uint64_t, uint64_t>{{0x2000, 20}, {0x3000, 30}});
    CHECK(child_trace.header().ppid == getpid());
    CHECK(child_trace.header().parent_trace == parent_path);
    CHECK(child_trace.header().counters.free_unknown == 1);
    CHECK(child_trace.header().end.state == gpuleak::format::EndState::Exited);
    CHECK(child_trace.header().end.exit_code == 3);
}

TEST_CASE("how the process ended: exit code or fatal signal or no record after SIGKILL") {
    TempDir dir;
    start_recording_into(dir);
    auto run_child = [&](int how) {
        pid_t child = fork();
        if (child == 0) {
            gpuleak::record_alloc(device_allocation(0x5000, 50));
            if (how == SIGKILL || how == SIGTERM)
                raise(how);
            std::exit(how);
        }
        int status = 0;
        waitpid(child, &status, 0);
        return TraceReader::open(dir.path() + "/trace." + std::to_string(child));
    };
    TraceReader exited = run_child(7);
    CHECK(exited.header().end.state == gpuleak::format::EndState::Exited);
    CHECK(exited.header().end.exit_code == 7);
    TraceReader terminated = run_child(SIGTERM);
    CHECK(terminated.header().end.state == gpuleak::format::EndState::Signaled);
    CHECK(terminated.header().end.signal == SIGTERM);
    TraceReader killed = run_child(SIGKILL);
    CHECK(killed.header().end.state == gpuleak::format::EndState::Running);
    CHECK(live_of(killed) == std::map<uint64_t, uint64_t>{{0x5000, 50}});
}
