// How gpuleak behaves as part of the process it is preloaded into: where and how it creates its trace
// file, what its settings do (and what a malformed one does), what it says on stderr, and how the end
// of the process is recorded, with process_end on the simulated device.
#include <catch2/catch.hpp>

#include <algorithm>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/stat.h>

#include "logged_calls.h"

namespace fs = std::filesystem;
using gpuleak::analyzer::Event;
using gpuleak::analyzer::TraceReader;
using gpuleak::format::EndState;
using gpuleak::format::EventType;

namespace {

LoggedRun run_process_end(const TempDir& directory, const std::string& mode, const RunOptions& options = {}) {
    return run_logged(directory, program_path("process_end"), {mode}, options);
}

// The names of the files in `directory`, but for the program's log.
std::vector<std::string> files_in(const std::string& directory) {
    std::vector<std::string> names;
    for (const auto& entry : fs::directory_iterator(directory))
        if (entry.path().filename() != "program.log")
            names.push_back(entry.path().filename().string());
    std::sort(names.begin(), names.end());
    return names;
}

std::string read_file(const std::string& path) {
    std::ifstream file(path, std::ios::binary);
    return {std::istreambuf_iterator<char>(file), std::istreambuf_iterator<char>()};
}

const Event* find_event(const std::vector<Event>& events, EventType type) {
    const auto found =
        std::find_if(events.begin(), events.end(), [&](const Event& event) { return event.type == type; });
    return found == events.end() ? nullptr : &*found;
}

// The native frames of the program's allocation.
std::vector<uint64_t> allocation_stack(const TraceReader& trace) {
    const Event* allocation = find_event(trace.events().events, EventType::Alloc);
    REQUIRE(allocation != nullptr);
    const auto stack = trace.stacks().find(allocation->stack_id);
    return stack == trace.stacks().end() ? std::vector<uint64_t>{} : stack->second;
}

void check_recorded(const LoggedRun& run) {
    const TraceReader trace = only_trace(run.run);
    CHECK(trace.header().simulated_device());
    CHECK(find_event(trace.events().events, EventType::Alloc) != nullptr);
}

// Files are created with the mode asked for, whatever the umask would take away.
class UmaskForChildren {
  public:
    explicit UmaskForChildren(mode_t mask) : saved_(::umask(mask)) {}
    ~UmaskForChildren() { ::umask(saved_); }
    UmaskForChildren(const UmaskForChildren&) = delete;
    UmaskForChildren& operator=(const UmaskForChildren&) = delete;

  private:
    mode_t saved_;
};

} // namespace

TEST_CASE("GPULEAK_OUTPUT names the trace file after the pid") {
    TempDir directory;
    const LoggedRun run = run_process_end(
        directory, "return0", with_environment({"GPULEAK_OUTPUT=" + directory.path() + "/100%%-%p.trace"}));
    REQUIRE(run.run.exited_with(0));
    const std::vector<std::string> files = files_in(directory.path());
    REQUIRE(files.size() == 1);
    const TraceReader trace = TraceReader::open(directory.path() + "/" + files[0]);
    CHECK(files[0] == "100%-" + std::to_string(trace.header().pid) + ".trace");
}

TEST_CASE(
    "without GPULEAK_OUTPUT the trace is gpuleak.pid.trace in the working directory and stderr names it") {
    TempDir directory;
    TempDir working_directory;
    RunOptions default_output;
    default_output.unset = {"GPULEAK_OUTPUT"};
    default_output.working_directory = working_directory.path();
    const LoggedRun run = run_process_end(directory, "return0", default_output);
    REQUIRE(run.run.exited_with(0));
    const std::vector<std::string> files = files_in(working_directory.path());
    REQUIRE(files.size() == 1);
    const TraceReader trace = TraceReader::open(working_directory.path() + "/" + files[0]);
    const std::string pid = std::to_string(trace.header().pid);
    CHECK(files[0] == "gpuleak." + pid + ".trace");
    CHECK(files_in(directory.path()).empty());
    // One line, nothing else on stderr.
    const std::vector<std::string> lines = gpuleak_lines(run.run.err);
    REQUIRE(lines.size() == 1);
    CHECK(run.run.err == lines[0] + "\n");
    CHECK(lines[0].find("pid " + pid + " ") != std::string::npos);
    // By the name it was given or made absolute.
    const std::string absolute = fs::canonical(working_directory.path() + "/" + files[0]).string();
    CHECK((lines[0].ends_with(" to " + files[0]) || lines[0].ends_with(" to " + absolute)));
}

TEST_CASE("GPULEAK_QUIET=1 leaves stderr to the program") {
    TempDir directory;
    const LoggedRun run = run_process_end(directory, "return0", with_environment({"GPULEAK_QUIET=1"}));
    REQUIRE(run.run.exited_with(0));
    check_recorded(run);
    CHECK(run.run.err.empty());
}

TEST_CASE("a trace file name that is taken gets .1 then .2 appended") {
    TempDir directory;
    const std::string taken = directory.path() + "/fixed.trace";
    std::ofstream(taken) << "someone else's file\n";
    const RunOptions options = with_environment({"GPULEAK_OUTPUT=" + taken});
    const LoggedRun first = run_process_end(directory, "return0", options);
    const LoggedRun second = run_process_end(directory, "return0", options);
    REQUIRE(first.run.exited_with(0));
    REQUIRE(second.run.exited_with(0));
    CHECK(files_in(directory.path()) ==
          std::vector<std::string>{"fixed.trace", "fixed.trace.1", "fixed.trace.2"});
    CHECK(read_file(taken) == "someone else's file\n");
    CHECK(TraceReader::open(taken + ".1").header().simulated_device());
    CHECK(TraceReader::open(taken + ".2").header().simulated_device());
    CHECK(gpuleak_lines(first.run.err) ==
          std::vector<std::string>{"gpuleak: recording GPU memory of pid " +
                                   std::to_string(TraceReader::open(taken + ".1").header().pid) + " (" +
                                   program_path("process_end") + ") to " + taken + ".1"});
}

TEST_CASE("a symbolic link at the trace file name is not followed") {
    TempDir directory;
    const std::string link = directory.path() + "/linked.trace";
    const std::string target = directory.path() + "/elsewhere";
    fs::create_symlink(target, link);
    const LoggedRun run = run_process_end(directory, "return0", with_environment({"GPULEAK_OUTPUT=" + link}));
    REQUIRE(run.run.exited_with(0));
    CHECK(!fs::exists(target));
    CHECK(fs::is_symlink(link));
    CHECK(TraceReader::open(link + ".1").header().simulated_device());
}

TEST_CASE("trace files are created with mode 0600") {
    TempDir directory;
    const UmaskForChildren no_mask(0);
    const LoggedRun run = run_process_end(directory, "return0");
    REQUIRE(run.run.exited_with(0));
    const std::vector<std::string> traces = run.run.traces();
    REQUIRE(traces.size() == 1);
    struct stat status {};
    REQUIRE(::lstat(traces[0].c_str(), &status) == 0);
    CHECK(S_ISREG(status.st_mode));
    CHECK((status.st_mode & 07777) == 0600);
}

TEST_CASE("a trace directory that cannot be written leaves the program as it was with one warning") {
    const RunOptions unwritable = with_environment({"GPULEAK_OUTPUT=/proc/nope/t"});
    TempDir traced_directory;
    const LoggedRun traced = run_process_end(traced_directory, "return3", unwritable);
    TempDir plain_directory;
    const LoggedRun plain = run_process_end(plain_directory, "return3", without_gpuleak(unwritable));
    CHECK(traced.run.exited_with(3));
    CHECK(plain.run.exited_with(3));
    REQUIRE(!plain.calls.empty());
    CHECK(comparable(traced.calls) == comparable(plain.calls));
    CHECK(traced.run.out == plain.run.out);
    CHECK(plain.run.err.empty());
    const std::vector<std::string> lines = gpuleak_lines(traced.run.err);
    REQUIRE(lines.size() == 1);
    CHECK(traced.run.err == lines[0] + "\n");
    CHECK(lines[0].find("/proc/nope/t") != std::string::npos);
    CHECK(files_in(traced_directory.path()).empty());
}

TEST_CASE(
    "a trace directory others may write to gets no trace and one warning, a sticky shared one is used") {
    TempDir directory;
    const std::string shared = directory.path() + "/shared";
    REQUIRE(::mkdir(shared.c_str(), 0700) == 0);
    // Another user could read, replace or remove a trace made there.
    REQUIRE(::chmod(shared.c_str(), 0777) == 0);
    const RunOptions into_shared = with_environment({"GPULEAK_OUTPUT=" + shared + "/trace.%p"});
    const LoggedRun refused = run_process_end(directory, "return3", into_shared);
    CHECK(refused.run.exited_with(3));
    const std::vector<std::string> lines = gpuleak_lines(refused.run.err);
    REQUIRE(lines.size() == 1);
    CHECK(lines[0] ==
          "gpuleak: the trace directory " + shared +
              " is writable by others than its owner: others could read, replace or remove a trace "
              "there; the program runs on unrecorded (set GPULEAK_OUTPUT to a directory of your own)");
    CHECK(files_in(shared).empty());
    // With the sticky bit, as /tmp has, no one else can remove or rename what is made there.
    REQUIRE(::chmod(shared.c_str(), 01777) == 0);
    const LoggedRun recorded = run_process_end(directory, "return3", into_shared);
    CHECK(recorded.run.exited_with(3));
    CHECK(files_in(shared).size() == 1);
}

namespace {

// A file system of `megabytes` mounted at `path` for the test's length; mounted() is false where this
// process may not mount one (not root, or no CAP_SYS_ADMIN in its namespace).
class SmallFileSystem {
  public:
    SmallFileSystem(const std::string& path, int megabytes) : path_(path) {
        ::mkdir(path.c_str(), 0700);
        const std::string options = "size=" + std::to_string(megabytes) + "m,mode=0700";
        mounted_ = ::mount("gpuleak-test", path.c_str(), "tmpfs", 0, options.c_str()) == 0;
    }
    ~SmallFileSystem() {
        if (mounted_)
            ::umount(path_.c_str());
    }
    SmallFileSystem(const SmallFileSystem&) = delete;
    SmallFileSystem& operator=(const SmallFileSystem&) = delete;
    [[nodiscard]] bool mounted() const { return mounted_; }

  private:
    std::string path_;
    bool mounted_ = false;
};

} // namespace

TEST_CASE(
    "GPULEAK_MAX_MB past the free space of the trace's file system gets one warning and a size that fits") {
    TempDir directory;
    const std::string small = directory.path() + "/small";
    const SmallFileSystem file_system(small, 64);
    if (!file_system.mounted()) {
        WARN("not tested: this process may not mount a file system (" << std::strerror(errno) << ")");
        return;
    }
    const LoggedRun run =
        run_process_end(directory, "return0",
                        with_environment({"GPULEAK_OUTPUT=" + small + "/trace.%p", "GPULEAK_MAX_MB=256"}));
    CHECK(run.run.exited_with(0));
    // The warning, then the line that says where the trace goes.
    const std::vector<std::string> lines = gpuleak_lines(run.run.err);
    REQUIRE(lines.size() == 2);
    CHECK(lines[1].starts_with("gpuleak: recording GPU memory of pid "));
    CHECK(lines[0] ==
          "gpuleak: GPULEAK_MAX_MB=256 is more than half of the 64 MiB free where the trace goes (" + small +
              "): this trace is made of at most 32 MiB");
    const std::vector<std::string> traces = files_in(small);
    REQUIRE(traces.size() == 1);
    const TraceReader trace = TraceReader::open(small + "/" + traces[0]);
    CHECK(trace.header().file_bytes <= uint64_t{32} << 20);
    CHECK(trace.live_allocations().allocations.empty());
}

TEST_CASE("malformed settings each get one warning and their default") {
    TempDir baseline_directory;
    const LoggedRun baseline = run_process_end(baseline_directory, "return0");
    TempDir directory;
    const LoggedRun run = run_process_end(directory, "return0",
                                          with_environment({"GPULEAK_MAX_MB=lots", "GPULEAK_STACK_DEPTH=-3",
                                                            "GPULEAK_QUIET=yes", "GPULEAK_SAMPLE_MS=0"}));
    REQUIRE(baseline.run.exited_with(0));
    REQUIRE(run.run.exited_with(0));
    const std::vector<std::string> lines = gpuleak_lines(run.run.err);
    INFO("stderr: " << run.run.err);
    for (const char* name : {"GPULEAK_MAX_MB", "GPULEAK_STACK_DEPTH", "GPULEAK_QUIET", "GPULEAK_SAMPLE_MS"}) {
        INFO(name);
        CHECK(std::count_if(lines.begin(), lines.end(), [&](const std::string& line) {
                  return line.find(name) != std::string::npos;
              }) == 1);
    }
    // The four warnings, and the line naming the trace: GPULEAK_QUIET fell back to 0.
    CHECK(lines.size() == 5);
    const TraceReader baseline_trace = only_trace(baseline.run);
    const TraceReader trace = only_trace(run.run);
    const auto& defaults = baseline_trace.header();
    const auto& header = trace.header();
    CHECK(defaults.stack_depth == 64);
    CHECK(defaults.timeline_interval_ms_initial == 100);
    CHECK(defaults.file_bytes <= uint64_t{256} << 20);
    CHECK(defaults.file_bytes > uint64_t{128} << 20);
    CHECK(header.stack_depth == defaults.stack_depth);
    CHECK(header.timeline_interval_ms_initial == defaults.timeline_interval_ms_initial);
    CHECK(header.file_bytes == defaults.file_bytes);
}

TEST_CASE("GPULEAK_STACK_DEPTH=3 keeps at most three frames and 0 keeps none") {
    TempDir baseline_directory;
    const LoggedRun baseline = run_process_end(baseline_directory, "return0");
    REQUIRE(baseline.run.exited_with(0));
    CHECK(allocation_stack(only_trace(baseline.run)).size() > 3);

    TempDir directory;
    const LoggedRun run = run_process_end(directory, "return0", with_environment({"GPULEAK_STACK_DEPTH=3"}));
    REQUIRE(run.run.exited_with(0));
    const TraceReader trace = only_trace(run.run);
    CHECK(trace.header().stack_depth == 3);
    CHECK(allocation_stack(trace).size() == 3);
    for (const auto& [id, frames] : trace.stacks())
        CHECK(frames.size() <= 3);

    TempDir without_stacks_directory;
    const LoggedRun without_stacks =
        run_process_end(without_stacks_directory, "return0", with_environment({"GPULEAK_STACK_DEPTH=0"}));
    REQUIRE(without_stacks.run.exited_with(0));
    const TraceReader stackless = only_trace(without_stacks.run);
    CHECK(stackless.stacks().empty());
    CHECK(find_event(stackless.events().events, EventType::Alloc)->stack_id == 0);
}

TEST_CASE("GPULEAK_MAX_MB=4 makes a trace file of at most 4 MiB") {
    TempDir directory;
    const LoggedRun run = run_process_end(directory, "return0", with_environment({"GPULEAK_MAX_MB=4"}));
    REQUIRE(run.run.exited_with(0));
    const std::vector<std::string> traces = run.run.traces();
    REQUIRE(traces.size() == 1);
    CHECK(fs::file_size(traces[0]) <= uint64_t{4} << 20);
    const TraceReader trace = TraceReader::open(traces[0]);
    CHECK(trace.header().file_bytes == fs::file_size(traces[0]));
    CHECK(find_event(trace.events().events, EventType::Free) != nullptr);
}

TEST_CASE("returning 3 from main is recorded as an exit with status 3") {
    TempDir directory;
    const LoggedRun run = run_process_end(directory, "return3");
    CHECK(run.run.exited_with(3));
    const TraceReader trace = only_trace(run.run);
    CHECK(trace.header().end.state == EndState::Exited);
    CHECK(trace.header().end.exit_code == 3);
}

TEST_CASE("_exit(5) is recorded as an exit with status 5") {
    TempDir directory;
    const LoggedRun run = run_process_end(directory, "_exit5");
    CHECK(run.run.exited_with(5));
    const TraceReader trace = only_trace(run.run);
    CHECK(trace.header().end.state == EndState::Exited);
    CHECK(trace.header().end.exit_code == 5);
    CHECK(trace.live_allocations().allocations.size() == 1);
}

TEST_CASE("a fatal SIGSEGV is recorded and still ends the program") {
    // The test process's limit passes to the programs: no core files to write.
    const rlimit no_core{0, 0};
    REQUIRE(::setrlimit(RLIMIT_CORE, &no_core) == 0);
    TempDir directory;
    const LoggedRun run = run_process_end(directory, "raise_segv");
    TempDir plain_directory;
    const LoggedRun plain = run_process_end(plain_directory, "raise_segv", without_gpuleak());
    CHECK(run.run.killed_by(SIGSEGV));
    CHECK(plain.run.killed_by(SIGSEGV));
    const TraceReader trace = only_trace(run.run);
    CHECK(trace.header().end.state == EndState::Signaled);
    CHECK(trace.header().end.signal == SIGSEGV);
    CHECK(trace.live_allocations().allocations.size() == 1);
}

TEST_CASE("a program's own SIGTERM handler and ignored SIGPIPE stay as the program set them") {
    TempDir directory;
    const LoggedRun run = run_process_end(directory, "own_sigterm_handler");
    TempDir plain_directory;
    const LoggedRun plain = run_process_end(plain_directory, "own_sigterm_handler", without_gpuleak());
    INFO("stderr: " << run.run.err);
    CHECK(run.run.exited_with(0));
    CHECK(plain.run.exited_with(0));
    const std::vector<std::string> lines = comparable(run.calls);
    const std::string sigterm = std::to_string(SIGTERM);
    CHECK(std::count(lines.begin(), lines.end(), "call on_sigterm signal=" + sigterm) == 1);
    CHECK(std::count(lines.begin(), lines.end(), "call sigaction signal=" + sigterm + " own_handler=1") == 1);
    CHECK(std::count(lines.begin(), lines.end(),
                     "call sigaction signal=" + std::to_string(SIGPIPE) + " ignored=1") == 1);
    CHECK(lines == comparable(plain.calls));
    const TraceReader trace = only_trace(run.run);
    CHECK(trace.header().end.state == EndState::Exited);
    CHECK(trace.header().end.exit_code == 0);
}

TEST_CASE("a marker from gpuleak_try_mark is recorded with its label and is a no-op without gpuleak") {
    TempDir directory;
    const LoggedRun run = run_process_end(directory, "mark");
    TempDir plain_directory;
    const LoggedRun plain = run_process_end(plain_directory, "mark", without_gpuleak());
    REQUIRE(run.run.exited_with(0));
    CHECK(plain.run.exited_with(0));
    CHECK(plain.run.traces().empty());
    CHECK(comparable(run.calls) == comparable(plain.calls));
    const TraceReader trace = only_trace(run.run);
    const Event* marker = find_event(trace.notable_events().events, EventType::Marker);
    REQUIRE(marker != nullptr);
    const auto label = trace.strings().find(static_cast<uint32_t>(marker->address));
    REQUIRE(label != trace.strings().end());
    CHECK(label->second == "after warmup");
    // Between the allocation and the free, as the program placed it.
    std::vector<EventType> order;
    for (const Event& event : trace.events().events)
        order.push_back(event.type);
    CHECK(order == std::vector<EventType>{EventType::Alloc, EventType::Marker, EventType::Free});
}

TEST_CASE("the C API called from a signal handler that interrupted it on the same thread returns") {
    TempDir directory;
    RunOptions options;
    // Before, a call that found its thread's own lock held spun on it forever.
    options.kill_after = std::chrono::seconds(60);
    const LoggedRun run = run_process_end(directory, "reenter", options);
    INFO("stderr: " << run.run.err);
    REQUIRE(run.run.exited_with(0));
    const std::vector<std::string> lines = comparable(run.calls);
    CHECK(std::count(lines.begin(), lines.end(), "call handler ran=1") == 1);
    // What the handler asked for while its thread was inside gpuleak was dropped and counted; the rest
    // was recorded.
    const TraceReader trace = only_trace(run.run);
    CHECK(trace.header().counters.reentry_dropped > 0);
    CHECK(trace.header().end.state == EndState::Exited);
}

TEST_CASE("a handler the program installs later that chains to gpuleak's ends the process as without it") {
    for (const auto& [mode, signal_number] :
         {std::pair{"chain_sigterm", SIGTERM}, {"chain_sigsegv", SIGSEGV}}) {
        TempDir directory;
        const LoggedRun run = run_process_end(directory, mode);
        TempDir plain_directory;
        const LoggedRun plain = run_process_end(plain_directory, mode, without_gpuleak());
        INFO(mode << " stderr: " << run.run.err);
        // Before, gpuleak's handler, called by the program's, raised the signal again into the program's
        // handler, which the program stopped after 5 rounds with status 99.
        CHECK(plain.run.killed_by(signal_number));
        CHECK(run.run.killed_by(signal_number));
        CHECK(comparable(run.calls) == comparable(plain.calls));
        // Its handler finishes what it does after the handler it found, as it does without gpuleak.
        const std::vector<std::string> lines = comparable(run.calls);
        CHECK(std::count(lines.begin(), lines.end(),
                         "call chained_handler_returned signal=" + std::to_string(signal_number)) == 1);
        const TraceReader trace = only_trace(run.run);
        CHECK(trace.header().end.state == EndState::Signaled);
        CHECK(trace.header().end.signal == signal_number);
    }
}
