// The recorder across process boundaries: fork, exit and fatal signals. Each test case runs in a
// process of its own (ctest starts the binary once per case), so each gets a fresh recorder.
#include <catch2/catch.hpp>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <sys/wait.h>
#include <unistd.h>

#include "recorder_test_support.h"

using gpuleak::Allocation;
using gpuleak::KeySpace;
using gpuleak::MemoryKind;
using gpuleak::analyzer::TraceReader;
using gpuleak::format::EventType;

using namespace recorder_test;

namespace {

// One call site for parent and child: the child's stack must still be one of its own trace's stacks.
__attribute__((noinline)) void allocate_at_one_place(uint64_t address, uint64_t size) {
    gpuleak::record_alloc(device_allocation(address, size));
    asm volatile("" ::: "memory"); // not a tail call: this frame stays on the stack
}

} // namespace

TEST_CASE("a forked child writes its own trace and never its parent's") {
    TempDir dir;
    const std::string parent_path = start_recording_into(dir);
    // One loop, not unrolled (its bound is volatile): both allocations come from one call instruction.
    const uint64_t addresses[] = {0x1000, 0x2000};
    const uint64_t sizes[] = {10, 20};
    pid_t child = -1;
    volatile int rounds = 2;
    for (int round = 0; round < rounds; ++round) {
        if (round == 1) {
            child = fork();
            REQUIRE(child >= 0);
            if (child > 0)
                break;
        }
        allocate_at_one_place(addresses[round], sizes[round]);
    }
    if (child == 0) {
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
    // Made at the same place as the parent's object (fork keeps the addresses): the same frames, found
    // under the child's own stack id.
    auto stack_of = [](const TraceReader& trace, uint64_t address) {
        for (const auto& allocation : trace.live_allocations().allocations)
            if (allocation.address == address && trace.stacks().count(allocation.stack_id) == 1)
                return trace.stacks().at(allocation.stack_id);
        return std::vector<uint64_t>{};
    };
    const std::vector<uint64_t> parent_frames = stack_of(parent, 0x1000);
    CHECK(!parent_frames.empty());
    CHECK(stack_of(child_trace, 0x2000) == parent_frames);
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
    CHECK(terminated.header().end.sender.kind == gpuleak::format::SenderKind::Itself);
    CHECK(terminated.header().end.sender.pid == terminated.header().pid);
    CHECK_FALSE(terminated.header().end.sender.written_by_launcher);
    TraceReader killed = run_child(SIGKILL);
    CHECK(killed.header().end.state == gpuleak::format::EndState::Running);
    CHECK(live_of(killed) == std::map<uint64_t, uint64_t>{{0x5000, 50}});
}

TEST_CASE("a signal another process sent is recorded with its sender's pid and name") {
    TempDir dir;
    start_recording_into(dir);
    int ready[2];
    REQUIRE(pipe(ready) == 0);
    pid_t child = fork();
    if (child == 0) {
        gpuleak::record_alloc(device_allocation(0x6000, 60));
        const char byte = 1;
        [[maybe_unused]] const ssize_t written = write(ready[1], &byte, 1);
        for (;;)
            pause();
    }
    char byte = 0;
    REQUIRE(read(ready[0], &byte, 1) == 1);
    kill(child, SIGHUP);
    int status = 0;
    REQUIRE(waitpid(child, &status, 0) == child);
    CHECK(WIFSIGNALED(status));
    CHECK(WTERMSIG(status) == SIGHUP);
    close(ready[0]);
    close(ready[1]);

    const TraceReader trace = TraceReader::open(dir.path() + "/trace." + std::to_string(child));
    const gpuleak::analyzer::SignalSender& sender = trace.header().end.sender;
    CHECK(trace.header().end.signal == SIGHUP);
    CHECK(sender.kind == gpuleak::format::SenderKind::Process);
    CHECK(sender.pid == getpid());
    CHECK(sender.uid == getuid());
    CHECK(sender.signal_code == SI_USER);
    char comm[32] = {};
    FILE* own = std::fopen("/proc/self/comm", "r");
    REQUIRE(own != nullptr);
    REQUIRE(std::fgets(comm, sizeof comm, own) != nullptr);
    std::fclose(own);
    std::string expected = comm;
    expected.erase(expected.find_last_not_of('\n') + 1);
    CHECK(sender.name == expected);
}

TEST_CASE("a process killed after frees and reuse leaves its whole live set below the marks") {
    TempDir dir;
    start_recording_into(dir);
    // Frees make room that later allocations reuse, so the marks cover fewer slots than were allocated.
    const auto expected = [] {
        std::map<uint64_t, uint64_t> live;
        for (uint64_t i = 1; i <= 2000; ++i)
            live[i * 0x1000] = i;
        for (uint64_t i = 1; i <= 2000; i += 2)
            live.erase(i * 0x1000);
        for (uint64_t i = 2001; i <= 2700; ++i)
            live[i * 0x1000] = i;
        return live;
    }();
    pid_t child = fork();
    if (child == 0) {
        for (uint64_t i = 1; i <= 2000; ++i)
            gpuleak::record_alloc(device_allocation(i * 0x1000, i));
        for (uint64_t i = 1; i <= 2000; i += 2)
            gpuleak::record_free(KeySpace::Pointer, i * 0x1000, 0, 0);
        for (uint64_t i = 2001; i <= 2700; ++i)
            gpuleak::record_alloc(device_allocation(i * 0x1000, i));
        raise(SIGKILL);
    }
    int status = 0;
    waitpid(child, &status, 0);
    REQUIRE(WIFSIGNALED(status));
    TraceReader killed = TraceReader::open(dir.path() + "/trace." + std::to_string(child));
    CHECK(live_of(killed) == expected);
    CHECK(killed.live_allocations().invalid_slots == 0);
    CHECK(killed.warnings().empty());
}

TEST_CASE("children killed while their traces are being made leave no half-made file") {
    TempDir dir;
    start_recording_into(dir);
    // SIGKILL at moments spread over the child's making of its trace, inside fork().
    for (int i = 0; i < 100; ++i) {
        const pid_t child = fork();
        if (child == 0) {
            gpuleak::record_alloc(device_allocation(0x6000, 60));
            pause();
        }
        usleep(static_cast<useconds_t>(i * 20));
        kill(child, SIGKILL);
        waitpid(child, nullptr, 0);
    }
    for (const auto& entry : std::filesystem::directory_iterator(dir.path())) {
        INFO(entry.path().string());
        CHECK_NOTHROW(TraceReader::open(entry.path().string()));
    }
}
