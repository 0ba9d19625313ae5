// Traces across process boundaries: forked workers, exec'd children, a process that execs itself, and
// allocations made by a library constructor before main.
#include <catch2/catch.hpp>

#include <algorithm>
#include <csignal>
#include <set>
#include <sys/wait.h>

#include "allocation_views.h"
#include "read/trace_reader.h"
#include "traced_run.h"

using gpuleak::analyzer::Event;
using gpuleak::analyzer::EventLog;
using gpuleak::analyzer::TraceReader;
using gpuleak::format::EndState;
using gpuleak::format::EventType;

namespace {

std::string trace_path_of(const TracedRun& run, int pid, const std::string& suffix = "") {
    return run.directory + "/trace." + std::to_string(pid) + suffix;
}

std::set<uint64_t> forked_pids(const EventLog& log) {
    std::set<uint64_t> pids;
    for (const auto& event : log.events)
        if (event.type == EventType::Fork)
            pids.insert(event.address);
    return pids;
}

bool command_line_has(const TraceReader& trace, const std::string& argument) {
    const auto& words = trace.header().command_line;
    return std::find(words.begin(), words.end(), argument) != words.end();
}

// The checks every trace of a process that ran to its end passes against the process's own account.
void check_trace_matches(const TraceReader& trace, int pid, const ProcessView& view, uint64_t other_events) {
    INFO("trace of pid " << pid);
    CHECK(trace.header().pid == pid);
    CHECK(live_difference(view.live, live_of(trace)) == "");
    CHECK(accounted_live_bytes(trace) == total_size(view.live));
    // Only this process's calls (and forks) were appended: nothing of another process's.
    CHECK(trace.header().counters.ring_head == view.calls + other_events);
    CHECK(trace.events().torn == 0);
    CHECK(trace.events().events.size() == view.calls + other_events);
    CHECK(trace.header().counters.free_unknown == view.unknown_frees);
}

void check_fork_workers(const std::string& fork_function, const std::string& ending) {
    constexpr int kWorkers = 3;
    constexpr int kCode = 7;
    TempDir dir;
    const std::string log = dir.path() + "/program.log";
    const TracedRun run =
        run_traced(dir, program_path("fork_worker"),
                   {log, fork_function, ending, std::to_string(kWorkers), std::to_string(kCode)});
    INFO(run.err);
    REQUIRE(run.exited_with(kCode));
    const std::vector<LogLine> lines = read_log(log);
    const auto views = process_views(lines);
    std::map<int, int> child_status;
    int parent = 0;
    for (const LogLine& line : lines) {
        if (line.size() == 4 && line[0] == "child") {
            parent = std::stoi(line[1]);
            child_status[std::stoi(line[2])] = std::stoi(line[3]);
        }
    }
    REQUIRE(child_status.size() == size_t{kWorkers});
    REQUIRE(views.size() == size_t{kWorkers} + 1);
    REQUIRE(views.contains(parent));

    std::vector<std::string> expected_traces{trace_path_of(run, parent)};
    for (const auto& [child, status] : child_status)
        expected_traces.push_back(trace_path_of(run, child));
    std::sort(expected_traces.begin(), expected_traces.end());
    REQUIRE(run.traces() == expected_traces);

    const std::string parent_path = trace_path_of(run, parent);
    const TraceReader parent_trace = TraceReader::open(parent_path);
    check_trace_matches(parent_trace, parent, views.at(parent), kWorkers);
    std::set<uint64_t> children;
    for (const auto& [child, status] : child_status)
        children.insert(static_cast<uint64_t>(child));
    CHECK(forked_pids(parent_trace.notable_events()) == children);
    CHECK(forked_pids(parent_trace.events()) == children);
    CHECK(parent_trace.header().end.state == EndState::Exited);
    CHECK(parent_trace.header().end.exit_code == kCode);

    for (const auto& [child, status] : child_status) {
        INFO("worker " << child);
        CHECK(WIFEXITED(status));
        CHECK(WEXITSTATUS(status) == kCode);
        const TraceReader child_trace = TraceReader::open(trace_path_of(run, child));
        const ProcessView& view = views.at(child);
        CHECK(view.unknown_frees == 1);
        check_trace_matches(child_trace, child, view, 0);
        CHECK(child_trace.header().ppid == parent);
        CHECK(child_trace.header().parent_trace == parent_path);
        CHECK(forked_pids(child_trace.notable_events()).empty());
        CHECK(child_trace.header().end.state == EndState::Exited);
        CHECK(child_trace.header().end.exit_code == kCode);
    }
}

} // namespace

TEST_CASE("forked workers ending with exit() record their own traces and never write their parent's") {
    check_fork_workers("fork", "exit");
}

TEST_CASE("forked workers ending with _exit() record their own traces and never write their parent's") {
    check_fork_workers("fork", "_exit");
}

// _Fork runs no pthread_atfork handlers: the child must still let go of its parent's trace.
TEST_CASE("workers forked with _Fork record their own traces and never write their parent's") {
    check_fork_workers("_Fork", "exit");
}

TEST_CASE("a child that execs after fork records its own trace") {
    TempDir dir;
    const std::string log = dir.path() + "/program.log";
    const TracedRun run = run_traced(dir, program_path("exec_child"), {log, "spawn"});
    INFO(run.err);
    REQUIRE(run.exited_with(0));
    const std::vector<LogLine> lines = read_log(log);
    const LogLine child_line = find_line(lines, "child");
    const LogLine leaf_line = find_line(lines, "leaf");
    REQUIRE(child_line.size() == 4);
    REQUIRE(leaf_line.size() == 3);
    const int parent = std::stoi(child_line[1]);
    const int child = std::stoi(child_line[2]);
    const int status = std::stoi(child_line[3]);
    CHECK(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 0);
    REQUIRE(std::stoi(leaf_line[1]) == child);
    const auto views = process_views(lines);
    REQUIRE(views.size() == 2);

    const std::string parent_path = trace_path_of(run, parent);
    const std::string child_path = trace_path_of(run, child);
    REQUIRE(run.traces() ==
            std::vector<std::string>{std::min(parent_path, child_path), std::max(parent_path, child_path)});
    const TraceReader parent_trace = TraceReader::open(parent_path);
    check_trace_matches(parent_trace, parent, views.at(parent), 1);
    CHECK(forked_pids(parent_trace.notable_events()) == std::set<uint64_t>{static_cast<uint64_t>(child)});

    const TraceReader child_trace = TraceReader::open(child_path);
    check_trace_matches(child_trace, child, views.at(child), 0);
    CHECK(child_trace.header().ppid == parent);
    CHECK(command_line_has(child_trace, "leaf"));
    CHECK(child_trace.header().end.state == EndState::Exited);
    CHECK(child_trace.header().end.exit_code == 0);
}

TEST_CASE("a process that execs itself gets a second trace under a suffixed name") {
    TempDir dir;
    const std::string log = dir.path() + "/program.log";
    const TracedRun run = run_traced(dir, program_path("exec_child"), {log, "reexec"});
    INFO(run.err);
    REQUIRE(run.exited_with(0));
    const auto before_exec = process_views(read_log(log));
    const std::vector<LogLine> leaf_lines = read_log(log + ".leaf");
    const auto after_exec = process_views(leaf_lines);
    REQUIRE(before_exec.size() == 1);
    REQUIRE(after_exec.size() == 1);
    const int pid = before_exec.begin()->first;
    REQUIRE(after_exec.begin()->first == pid);

    const std::string first_path = trace_path_of(run, pid);
    const std::string second_path = trace_path_of(run, pid, ".1");
    REQUIRE(run.traces() == std::vector<std::string>{first_path, second_path});
    const TraceReader first = TraceReader::open(first_path);
    const TraceReader second = TraceReader::open(second_path);
    check_trace_matches(first, pid, before_exec.begin()->second, 0);
    check_trace_matches(second, pid, after_exec.begin()->second, 0);
    CHECK(command_line_has(first, "reexec"));
    CHECK(first.header().end.state == EndState::Exec);
    CHECK(command_line_has(second, "leaf"));
    CHECK(second.header().ppid == first.header().ppid);
    CHECK(second.header().end.state == EndState::Exited);
    CHECK(second.header().end.exit_code == 0);
}

TEST_CASE("an exec that fails leaves the process recording and ends it as it really ends") {
    TempDir dir;
    const std::string log = dir.path() + "/program.log";
    const TracedRun run = run_traced(dir, program_path("exec_child"), {log, "failexec"});
    INFO(run.err);
    REQUIRE(run.exited_with(0));
    const LogLine failed = find_line(read_log(log), "failed");
    REQUIRE(failed.size() == 2);
    CHECK(std::stoi(failed[1]) == ENOENT); // errno passes through the hook
    REQUIRE(run.traces().size() == 1);
    const TraceReader trace = TraceReader::open(run.traces()[0]);
    CHECK(trace.header().end.state == EndState::Exited);
    CHECK(trace.header().end.exit_code == 0);
}

TEST_CASE("a vfork child that execs does not end its parent's trace, which records it as a fork") {
    TempDir dir;
    const std::string log = dir.path() + "/program.log";
    const TracedRun run = run_traced(dir, program_path("exec_child"), {log, "vfork"});
    INFO(run.err);
    REQUIRE(run.killed_by(SIGKILL));
    const LogLine vforked = find_line(read_log(log), "vforked");
    REQUIRE(vforked.size() == 3);
    const int status = std::stoi(vforked[2]);
    CHECK(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 0);
    REQUIRE(run.traces().size() == 1);
    const TraceReader trace = TraceReader::open(run.traces()[0]);
    CHECK(trace.header().end.state == EndState::Running);
    // multiprocessing's spawn starts its interpreters so: the parent's trace says which pid it started,
    // once for the two execs the child tried.
    const uint64_t child = std::stoull(vforked[1]);
    CHECK(std::count_if(trace.notable_events().events.begin(), trace.notable_events().events.end(),
                        [](const Event& event) { return event.type == EventType::Fork; }) == 1);
    CHECK(forked_pids(trace.notable_events()) == std::set<uint64_t>{child});
    // The child ran on its parent's thread and left that thread's id to it.
    LogLine allocated;
    for (const LogLine& line : read_log(log))
        if (line.size() == 5 && line[0] == "alloc" && line[4] == "600")
            allocated = line;
    REQUIRE(!allocated.empty());
    const auto& events = trace.events().events;
    const auto after = std::find_if(events.begin(), events.end(), [](const Event& event) {
        return event.type == EventType::Alloc && event.size == 600;
    });
    REQUIRE(after != events.end());
    CHECK(after->thread_id == std::stoul(allocated[2]));
    CHECK(after->thread_id != child);
}

TEST_CASE("an allocation in a library constructor before main is recorded") {
    TempDir dir;
    const std::string log = dir.path() + "/program.log";
    const TracedRun run = run_traced(dir, program_path("early_constructor"), {log});
    INFO(run.err);
    REQUIRE(run.exited_with(0));
    const std::vector<LogLine> lines = read_log(log);
    const auto views = process_views(lines);
    REQUIRE(views.size() == 1);
    const ProcessView& view = views.begin()->second;
    // The constructor's allocation (logged first) and main's.
    REQUIRE(view.live.size() == 2);
    const uint64_t constructors = log_number(find_line(lines, "alloc").at(3));
    REQUIRE(run.traces().size() == 1);
    const TraceReader trace = TraceReader::open(run.traces()[0]);
    check_trace_matches(trace, views.begin()->first, view, 0);
    REQUIRE(!trace.events().events.empty());
    CHECK(trace.events().events.front().address == constructors);
}
