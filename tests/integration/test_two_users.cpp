// Two users of one machine: the one whose run, report and kernel are attacked, and another who plants
// directories, links, FIFOs and traces where both may write (a shared project directory, /tmp). Each
// runs as itself through setpriv; scripts/setup.sh makes both users, and the tests need root to act
// as them (elsewhere they say so and skip).
#include <catch2/catch.hpp>

#include <filesystem>
#include <fmt/format.h>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <pwd.h>
#include <sstream>
#include <sys/stat.h>
#include <unistd.h>

#include "traced_run.h"

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

struct TestUser {
    uid_t uid = 0;
    gid_t gid = 0;
};

// The user named so by scripts/setup.sh, when this process may act as them.
std::optional<TestUser> test_user(const char* name) {
    const passwd* entry = ::getpwnam(name);
    if (entry == nullptr || ::geteuid() != 0)
        return std::nullopt;
    return TestUser{entry->pw_uid, entry->pw_gid};
}

// The two users, and a directory both can enter, kept as long as the test runs.
class TwoUsers {
  public:
    TwoUsers() : victim_(test_user("gpuleak-test-victim")), other_(test_user("gpuleak-test-other")) {
        if (!ready())
            return;
        ::chmod(dir_.path().c_str(), 0755);
        // Where the other user makes the directories they share: /tmp's kind, open to all, sticky.
        ::mkdir(path("common").c_str(), 01777);
        ::chmod(path("common").c_str(), 01777);
    }
    // False, with a warning, where the tests cannot act as both users.
    [[nodiscard]] bool ready() const {
        if (victim_ && other_)
            return true;
        WARN("not tested: the two test users need root and scripts/setup.sh");
        return false;
    }
    [[nodiscard]] const TempDir& dir() const { return dir_; }
    [[nodiscard]] std::string path(const std::string& name) const { return dir_.path() + "/" + name; }

    // A directory of the victim's own, 0700.
    std::string victim_directory(const std::string& name) const {
        std::string directory = path(name);
        REQUIRE(::mkdir(directory.c_str(), 0700) == 0);
        REQUIRE(::chown(directory.c_str(), victim_->uid, victim_->gid) == 0);
        return directory;
    }

    // `program` with `arguments` run by the victim: without gpuleak unless asked, at home in
    // `home`, which is its own.
    TracedRun as_victim(const std::string& home, const std::string& program,
                        const std::vector<std::string>& arguments, RunOptions options = {}) const {
        // The caller's settings come after, and win.
        options.environment.insert(options.environment.begin(),
                                   {"HOME=" + home, "XDG_STATE_HOME=" + home + "/state"});
        return as(*victim_, program, arguments, options);
    }

    // A directory the other user made, open to all, as a shared project directory is.
    std::string others_open_directory() const {
        std::string directory = path("common/shared");
        as_other("mkdir -m 0777 " + directory);
        return directory;
    }

    // A shell script run by the other user in the shared directory; it must succeed.
    void as_other(const std::string& script) const {
        RunOptions options;
        options.preload = false;
        const TracedRun run = as(*other_, "/bin/sh", {"-c", script}, options);
        INFO(script << ": " << run.err);
        REQUIRE(run.exited_with(0));
    }

    // The other user's program, recorded by gpuleak into `output`.
    TracedRun other_records(const std::string& output) const {
        RunOptions options;
        options.environment = {"GPULEAK_OUTPUT=" + output};
        return as(*other_, program_path("launched_command"), {"exit", "0"}, options);
    }

  private:
    TracedRun as(const TestUser& user, const std::string& program, const std::vector<std::string>& arguments,
                 const RunOptions& options) const {
        std::vector<std::string> command = {"--reuid=" + std::to_string(user.uid),
                                            "--regid=" + std::to_string(user.gid), "--clear-groups", "--",
                                            program};
        command.insert(command.end(), arguments.begin(), arguments.end());
        return run_traced(dir_, "/usr/bin/setpriv", command, options);
    }

    TempDir dir_;
    std::optional<TestUser> victim_;
    std::optional<TestUser> other_;
};

RunOptions without_preload() {
    RunOptions options;
    options.preload = false;
    return options;
}

} // namespace

TEST_CASE("two users: gpuleak run -o refuses the other user's open directory and never opens what they "
          "planted") {
    const TwoUsers users;
    if (!users.ready())
        return;
    const std::string shared = users.others_open_directory();
    const std::string home = users.victim_directory("home");
    RunOptions options = without_preload();
    options.kill_after = std::chrono::seconds(60);
    const auto run_into = [&](const std::string& directory) {
        return users.as_victim(home, GPULEAK_LAUNCHER,
                               {"run", "-o", directory, "--", program_path("launched_command"), "exit", "0"},
                               options);
    };
    TracedRun refused = run_into(shared);
    INFO(refused.err);
    CHECK(refused.exited_with(125));
    CHECK(refused.out.empty());
    CHECK(refused.err == "gpuleak: -o " + shared +
                             ": the directory is owned by another user: others could read, replace or remove "
                             "the run's traces and report; name a directory of your own with -o\n");
    // A FIFO where the report goes: with the other user reading it, it would hand them the report; with
    // no reader, it would hang the run.
    users.as_other("mkfifo -m 0666 " + shared + "/report.txt");
    refused = run_into(shared);
    INFO(refused.err);
    CHECK(refused.exited_with(125));
    CHECK(std::count(refused.err.begin(), refused.err.end(), '\n') == 1);

    // The same run into a directory of the victim's own: the report is theirs alone.
    const std::string own = home + "/run";
    const TracedRun accepted = run_into(own);
    INFO(accepted.err);
    REQUIRE(accepted.exited_with(0));
    struct stat report {};
    REQUIRE(::stat((own + "/report.txt").c_str(), &report) == 0);
    CHECK((report.st_mode & 07777) == 0600);
    CHECK(report.st_uid == ::getpwnam("gpuleak-test-victim")->pw_uid);
}

TEST_CASE("two users: a program that writes its trace into the other user's open directory runs as "
          "without gpuleak, with one warning and no trace") {
    const TwoUsers users;
    if (!users.ready())
        return;
    const std::string shared = users.others_open_directory();
    const std::string home = users.victim_directory("home");
    RunOptions options;
    options.environment = {"GPULEAK_OUTPUT=" + shared + "/trace.%p"};
    const TracedRun run = users.as_victim(home, program_path("launched_command"), {"exit", "3"}, options);
    CHECK(run.exited_with(3));
    CHECK(run.out == "hello\n");
    CHECK(std::count(run.err.begin(), run.err.end(), '\n') == 1);
    INFO(run.err);
    CHECK(run.err.find("the trace directory " + shared + " is owned by another user") != std::string::npos);
    CHECK(fs::is_empty(shared));
}

TEST_CASE("two users: a kernel's state directory the other user made first stops the kernel's launcher") {
    const TwoUsers users;
    if (!users.ready())
        return;
    for (const char* mode : {"0777", "0755"}) {
        const std::string home = users.victim_directory(std::string("home") + mode);
        // The state lives in a shared directory (XDG_STATE_HOME on a team's disk), where the other user
        // made the kernels' directory before the victim's first kernel: open to all, or theirs alone.
        const std::string shared = users.path(std::string("common/shared") + mode);
        users.as_other(fmt::format("mkdir -m 0777 {0} && mkdir -p -m {1} {0}/gpuleak/kernels && chmod {1} "
                                   "{0}/gpuleak {0}/gpuleak/kernels",
                                   shared, mode));
        RunOptions options = without_preload();
        options.kill_after = std::chrono::seconds(60);
        options.environment = {"XDG_STATE_HOME=" + shared};
        const TracedRun run =
            users.as_victim(home, GPULEAK_LAUNCHER,
                            {"kernel", "run", "--", program_path("launched_command"), "exit", "0"}, options);
        INFO(mode << ": " << run.err);
        CHECK(run.exited_with(125));
        CHECK(run.out.empty());
        CHECK(std::count(run.err.begin(), run.err.end(), '\n') == 1);
        CHECK(run.err.find(": the kernel's state directory is ") != std::string::npos);
        CHECK(fs::is_empty(shared + "/gpuleak/kernels"));
    }
}

TEST_CASE("two users: gpuleak-report -o never writes through the other user's link") {
    const TwoUsers users;
    if (!users.ready())
        return;
    const std::string home = users.victim_directory("home");
    RunOptions options;
    options.environment = {"GPULEAK_OUTPUT=" + home + "/trace.%p"};
    const TracedRun recorded =
        users.as_victim(home, program_path("launched_command"), {"exit", "0"}, options);
    REQUIRE(recorded.exited_with(0));
    std::string found;
    for (const auto& entry : fs::directory_iterator(home))
        if (entry.path().filename().string().rfind("trace.", 0) == 0)
            found = entry.path().string();
    REQUIRE(!found.empty());
    // A file of the victim's that the other user wants overwritten.
    const std::string precious = home + "/notes.txt";
    users.as_victim(home, "/bin/sh", {"-c", "echo kept > " + precious}, without_preload());
    REQUIRE(read_text(precious) == "kept\n");
    const std::string shared = users.others_open_directory();
    users.as_other("ln -s " + precious + " " + shared + "/report.txt");
    const TracedRun report = users.as_victim(
        home, GPULEAK_REPORT, {"--no-color", "-o", shared + "/report.txt", found}, without_preload());
    CHECK(report.exited_with(2));
    CHECK(report.err ==
          "gpuleak-report: " + shared + "/report.txt: cannot write the report: a symbolic link\n");
    CHECK(read_text(precious) == "kept\n");
}

TEST_CASE("two users: the other user's trace in a shared directory is left out of the victim's report") {
    const TwoUsers users;
    if (!users.ready())
        return;
    // /tmp's kind: open to all, sticky, root's.
    const std::string shared = users.path("common/shared");
    REQUIRE(::mkdir(shared.c_str(), 01777) == 0);
    REQUIRE(::chmod(shared.c_str(), 01777) == 0);
    const std::string home = users.victim_directory("home");
    RunOptions options;
    options.environment = {"GPULEAK_OUTPUT=" + shared + "/victim.%p.trace"};
    const TracedRun recorded =
        users.as_victim(home, program_path("launched_command"), {"exit", "0"}, options);
    INFO(recorded.err);
    REQUIRE(recorded.exited_with(0));
    const TracedRun planted = users.other_records(shared + "/planted.%p.trace");
    INFO(planted.err);
    REQUIRE(planted.exited_with(0));
    std::string planted_trace;
    for (const auto& entry : fs::directory_iterator(shared))
        if (entry.path().filename().string().rfind("planted.", 0) == 0)
            planted_trace = entry.path().string();
    REQUIRE(!planted_trace.empty());
    // Readable by all, for the victim's report to take it in.
    users.as_other("chmod 0644 " + planted_trace);

    const TracedRun report =
        users.as_victim(home, GPULEAK_REPORT, {"--format", "json", shared}, without_preload());
    INFO(report.err);
    REQUIRE(report.exited_with(0));
    CHECK(json::parse(report.out)["processes"].size() == 1);
    CHECK(report.err ==
          "gpuleak-report: warning: left out 1 trace of another user (--any-owner reads them): " +
              planted_trace + "\n");
}
