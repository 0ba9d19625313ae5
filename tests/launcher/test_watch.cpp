// gpuleak watch: a running traced program's memory, live, from its trace while it is written; until the
// program ends, then how it ended and its diagnosis.
#include <catch2/catch.hpp>

#include <chrono>
#include <filesystem>
#include <string>
#include <thread>

#include "traced_run.h"

namespace fs = std::filesystem;

namespace {

TracedRun watch(const TempDir& dir, const std::vector<std::string>& arguments) {
    RunOptions options;
    options.preload = false;
    std::vector<std::string> all = {"watch"};
    all.insert(all.end(), arguments.begin(), arguments.end());
    return run_traced(dir, GPULEAK_LAUNCHER, all, options);
}

// A program that keeps a buffer each step until it is killed (scenario_killed), recorded and running in
// a thread of the test's for `seconds`; its pid once its trace exists.
class RunningProgram {
  public:
    RunningProgram(const TempDir& dir, std::chrono::milliseconds running) {
        thread_ = std::thread([&dir, running, this] {
            RunOptions options;
            options.kill_after = running;
            run_ = run_traced(dir, program_path("scenario_killed"), {}, options);
        });
        const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(10);
        while (pid_.empty() && std::chrono::steady_clock::now() < give_up) {
            for (const auto& entry : fs::directory_iterator(dir.path()))
                if (entry.path().filename().string().starts_with("trace."))
                    pid_ = entry.path().filename().string().substr(6);
            std::this_thread::sleep_for(std::chrono::milliseconds(20));
        }
    }
    ~RunningProgram() { thread_.join(); }
    RunningProgram(const RunningProgram&) = delete;
    RunningProgram& operator=(const RunningProgram&) = delete;

    [[nodiscard]] const std::string& pid() const { return pid_; }

  private:
    std::thread thread_;
    TracedRun run_;
    std::string pid_;
};

size_t frames_in(const std::string& out) {
    size_t frames = 0;
    for (size_t at = out.find("gpuleak watch: pid"); at != std::string::npos;
         at = out.find("gpuleak watch: pid", at + 1))
        ++frames;
    return frames;
}

} // namespace

TEST_CASE("watch --once shows a running program's device now and the line that grows now") {
    TempDir dir;
    RunningProgram program(dir, std::chrono::milliseconds(2500));
    REQUIRE(!program.pid().empty());
    // Some steps, so that its buffers are made through its work.
    std::this_thread::sleep_for(std::chrono::milliseconds(700));
    TracedRun shown = watch(dir, {"--once", program.pid()});
    CHECK(shown.exited_with(0));
    CHECK(shown.err.empty());
    CHECK(frames_in(shown.out) == 1);
    CHECK_THAT(shown.out,
               Catch::Contains("gpuleak watch: pid " + program.pid() + " scenario_killed, running for"));
    CHECK_THAT(shown.out, Catch::Contains("device 0 of 16.0 GiB: reserved"));
    CHECK_THAT(shown.out, Catch::Contains("Growing now:\n  hold_buffer ("));
    CHECK_THAT(shown.out, Catch::Contains("scenario_killed.cpp:14)\n"));
    CHECK_THAT(shown.out, Catch::Contains("MiB/s; device 0 is full in"));
    // The same from its run's directory.
    TracedRun of_directory = watch(dir, {"--once", dir.path()});
    CHECK(of_directory.exited_with(0));
    CHECK_THAT(of_directory.out, Catch::Contains("scenario_killed.cpp:14)\n"));
}

TEST_CASE("watch follows a program until it ends, then says how it ended and what it found") {
    TempDir dir;
    RunningProgram program(dir, std::chrono::milliseconds(2000));
    REQUIRE(!program.pid().empty());
    TracedRun followed = watch(dir, {"--interval", "0.2", program.pid()});
    CHECK(followed.exited_with(0));
    CHECK(followed.err.empty());
    CHECK(frames_in(followed.out) >= 3);
    const std::string last = followed.out.substr(followed.out.rfind("gpuleak watch: pid"));
    CHECK_THAT(last, Catch::Contains("killed: no exit record"));
    CHECK_THAT(last, Catch::Contains("\nleak: "));
    CHECK_THAT(last, Catch::Contains("hold_buffer"));
}

TEST_CASE("watch goes on past a trace that cannot be read for a moment, as one caught while it is made") {
    TempDir other_dir;
    const TracedRun other = run_traced(other_dir, program_path("scenario_killed"), {}, [] {
        RunOptions options;
        options.kill_after = std::chrono::milliseconds(200);
        return options;
    }());
    REQUIRE(other.traces().size() == 1);
    TempDir dir;
    RunningProgram program(dir, std::chrono::milliseconds(2500));
    REQUIRE(!program.pid().empty());
    TracedRun followed;
    std::thread watching([&] { followed = watch(dir, {"--interval", "0.1", dir.path()}); });
    std::this_thread::sleep_for(std::chrono::milliseconds(800));
    // Another process's trace as it is made: its header written, not yet its header's whole space.
    const std::string partial = dir.path() + "/trace.1";
    fs::copy_file(other.traces().front(), partial);
    fs::resize_file(partial, 12000);
    std::this_thread::sleep_for(std::chrono::milliseconds(400));
    fs::remove(partial);
    watching.join();
    CHECK(followed.exited_with(0));
    CHECK(followed.err.empty());
    CHECK(frames_in(followed.out) >= 3);
    CHECK_THAT(followed.out.substr(followed.out.rfind("gpuleak watch: pid")), Catch::Contains("killed"));
}

TEST_CASE("watch refuses in one line what names no running traced program") {
    TempDir dir;
    for (const std::string& target :
         {std::string("2147483646"), std::to_string(::getpid()), dir.path() + "/no-such-run"}) {
        INFO(target);
        TracedRun refused = watch(dir, {"--once", target});
        CHECK(refused.exited_with(2));
        CHECK(refused.out.empty());
        CHECK(refused.err.find('\n') == refused.err.size() - 1);
        CHECK_THAT(refused.err, Catch::StartsWith("gpuleak: watch: "));
    }
    CHECK_THAT(watch(dir, {"--once", std::to_string(::getpid())}).err,
               Catch::Contains("not recorded by gpuleak"));
    CHECK_THAT(watch(dir, {"--once", "2147483646"}).err, Catch::Contains("no such process"));
}
