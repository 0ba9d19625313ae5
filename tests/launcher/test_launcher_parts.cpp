// The launcher's decisions, each on its own: the command line, where libgpuleak.so is and how it is
// preloaded, the command's environment, the run's directory, which signals go on to the command, the
// OOM evidence and the words of the summary.
#include <catch2/catch.hpp>

#include <cerrno>
#include <csignal>
#include <fcntl.h>
#include <filesystem>
#include <fstream>
#include <grp.h>
#include <optional>
#include <pwd.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/directory_trust.h"
#include "common/file_bytes.h"
#include "common/file_descriptor.h"
#include "launcher/child_environment.h"
#include "launcher/command_line.h"
#include "launcher/launcher_error.h"
#include "launcher/oom_evidence.h"
#include "launcher/preload_library.h"
#include "launcher/run_directory.h"
#include "launcher/run_summary.h"
#include "launcher/signal_forwarding.h"
#include "launcher/torch_adapter.h"
#include "temp_dir.h"

using namespace gpuleak::launcher;
namespace fs = std::filesystem;

namespace {

using Strings = std::vector<std::string>;

RunRequest parsed_run(const Strings& arguments) {
    const Invocation invocation = parse_command_line(arguments);
    REQUIRE(invocation.subcommand == Subcommand::Run);
    return invocation.run;
}

siginfo_t signal_from(int code, pid_t sender) {
    siginfo_t info{};
    info.si_code = code;
    info.si_pid = sender;
    return info;
}

void write_file(const fs::path& path, const std::string& text,
                fs::perms permissions = fs::perms::owner_read | fs::perms::owner_write) {
    fs::create_directories(path.parent_path());
    std::ofstream(path) << text;
    fs::permissions(path, permissions);
}

constexpr fs::perms kExecutable = fs::perms::owner_all;

// Sets an environment variable for one scope, putting back what was there.
class ScopedVariable {
  public:
    ScopedVariable(const char* name, const std::optional<std::string>& value) : name_(name) {
        if (const char* old = std::getenv(name))
            old_ = old;
        if (value)
            ::setenv(name, value->c_str(), 1);
        else
            ::unsetenv(name);
    }
    ~ScopedVariable() {
        if (old_)
            ::setenv(name_, old_->c_str(), 1);
        else
            ::unsetenv(name_);
    }
    ScopedVariable(const ScopedVariable&) = delete;
    ScopedVariable& operator=(const ScopedVariable&) = delete;

  private:
    const char* name_;
    std::optional<std::string> old_;
};

std::string join(const Strings& lines) {
    std::string text;
    for (const std::string& line : lines)
        text += line + "\n";
    return text;
}

} // namespace

TEST_CASE("the command starts after -- or at the first argument that is not run's") {
    CHECK(parsed_run({"run", "python", "train.py", "--lr", "1", "-o", "x"}).command ==
          Strings{"python", "train.py", "--lr", "1", "-o", "x"});
    const RunRequest request =
        parsed_run({"run", "-o", "out", "--max-mb", "8", "--quiet", "--", "python", "-o", "--max-mb"});
    CHECK(request.output_directory == "out");
    CHECK(request.max_mb == 8u);
    CHECK(request.quiet);
    CHECK_FALSE(request.no_python);
    CHECK_FALSE(request.stack_depth.has_value());
    CHECK(request.command == Strings{"python", "-o", "--max-mb"});
    CHECK(parsed_run({"run", "--output=d", "--stack-depth=0", "ls"}).stack_depth == 0u);
    CHECK(parsed_run({"run", "-od", "ls"}).output_directory == "d");
    CHECK(parsed_run({"run", "--", "--", "x"}).command == Strings{"--", "x"});
}

TEST_CASE("kernel list and uninstall search an interpreter's sys.prefix, and torch-adapter takes one") {
    const Invocation uninstall =
        parse_command_line({"kernel", "uninstall", "gpu", "--python", "/venv/bin/python"});
    CHECK(uninstall.subcommand == Subcommand::KernelUninstall);
    CHECK(uninstall.kernel_name == "gpu");
    CHECK(uninstall.python == "/venv/bin/python");
    CHECK(parse_command_line({"kernel", "list", "--python", "/venv/bin/python"}).python ==
          "/venv/bin/python");
    const Invocation adapter = parse_command_line({"torch-adapter"});
    CHECK(adapter.subcommand == Subcommand::TorchAdapter);
    CHECK(adapter.python == "python3");
    CHECK(parse_command_line({"torch-adapter", "--python", "/venv/bin/python"}).python == "/venv/bin/python");
}

TEST_CASE("usage errors are one line each") {
    for (const Strings& arguments :
         {Strings{}, Strings{"run"}, Strings{"run", "--"}, Strings{"run", "--bogus", "ls"},
          Strings{"run", "--max-mb", "65537", "ls"}, Strings{"run", "-o"}, Strings{"walk", "ls"},
          // A kernel's traces go to its state directory: an --output would be ignored, so it is refused.
          Strings{"kernel", "run", "-o", "d", "--", "python"}}) {
        INFO(arguments.size());
        try {
            parse_command_line(arguments);
            FAIL("accepted");
        } catch (const LauncherError& error) {
            CHECK(error.exit_status() == kLauncherFailed);
            CHECK(std::string(error.what()).find('\n') == std::string::npos);
        }
    }
}

TEST_CASE("libgpuleak.so is looked for in the build tree, then in the installed layout") {
    const Strings candidates = library_candidates("/work/build/launcher/gpuleak");
    REQUIRE(candidates.size() >= 2);
    CHECK(candidates[0] == "/work/build/interpose/libgpuleak.so");
    CHECK(std::find(candidates.begin(), candidates.end(), "/work/build/lib/libgpuleak.so") !=
          candidates.end());
    const Strings installed = library_candidates("/opt/gpuleak/bin/gpuleak");
    CHECK(std::find(installed.begin(), installed.end(), "/opt/gpuleak/lib/libgpuleak.so") != installed.end());
}

TEST_CASE("LD_PRELOAD gets libgpuleak.so first, the entries already there after it") {
    CHECK(preload_list("/g/libgpuleak.so", "") == "/g/libgpuleak.so");
    CHECK(preload_list("/g/libgpuleak.so", "liba.so:/x/libb.so libc.so") ==
          "/g/libgpuleak.so:liba.so:/x/libb.so:libc.so");
    // Another copy would record every call twice.
    CHECK(preload_list("/g/libgpuleak.so", "/old/libgpuleak.so::liba.so") == "/g/libgpuleak.so:liba.so");
    // AddressSanitizer refuses to run unless its runtime comes first.
    CHECK(preload_list("/g/libgpuleak.so", "liba.so:/usr/lib/libasan.so.8") ==
          "/usr/lib/libasan.so.8:/g/libgpuleak.so:liba.so");
}

TEST_CASE("the command's environment changes only what the launcher sets") {
    RunRequest request;
    request.max_mb = 16;
    request.no_python = true;
    const Strings environment =
        child_environment({"HOME=/h", "LD_PRELOAD=liba.so", "GPULEAK_OUTPUT=old", "PATH=/bin",
                           "LD_PRELOAD=libz.so", "GPULEAK_STACK_DEPTH=9"},
                          "/g/libgpuleak.so", "/r/gpuleak.%r%p.trace", request, "");
    CHECK(environment == Strings{"HOME=/h", "LD_PRELOAD=/g/libgpuleak.so:liba.so",
                                 "GPULEAK_OUTPUT=/r/gpuleak.%r%p.trace", "PATH=/bin", "GPULEAK_STACK_DEPTH=9",
                                 "GPULEAK_MAX_MB=16", "GPULEAK_PYTHON=0"});
}

TEST_CASE(
    "the command's environment names the Python package the library imports at an out-of-memory error") {
    const Strings environment =
        child_environment({"GPULEAK_PYTHON_PACKAGE=/elsewhere", "PATH=/bin"}, "/g/libgpuleak.so", "/r/p",
                          RunRequest{}, "/g/share/gpuleak/python");
    CHECK(environment == Strings{"GPULEAK_PYTHON_PACKAGE=/g/share/gpuleak/python", "PATH=/bin",
                                 "GPULEAK_OUTPUT=/r/p", "LD_PRELOAD=/g/libgpuleak.so"});
}

TEST_CASE("GPULEAK_OUTPUT escapes the directory's % and fits the recorder") {
    CHECK(output_pattern("/tmp/100%/run") == "/tmp/100%%/run/gpuleak.%r%p.trace");
    CHECK_THROWS_AS(output_pattern("/" + std::string(1100, 'd')), LauncherError);
}

TEST_CASE("a run directory is new, named after the command and the time, never one that exists") {
    TempDir parent;
    std::tm moment{};
    moment.tm_year = 2026 - 1900;
    moment.tm_mon = 10;
    moment.tm_mday = 30;
    moment.tm_hour = 9;
    moment.tm_min = 30;
    moment.tm_sec = 12;
    moment.tm_isdst = -1;
    const std::time_t started = std::mktime(&moment);
    const RunDirectory first = make_run_directory("", "/usr/bin/python3", started, parent.path());
    CHECK(first.path == parent.path() + "/gpuleak-python3-20261130-093012");
    CHECK(first.created);
    CHECK((fs::status(first.path).permissions() & fs::perms::all) == fs::perms::owner_all);
    const RunDirectory second = make_run_directory("", "python3", started, parent.path());
    CHECK(second.path == parent.path() + "/gpuleak-python3-20261130-093012-2");
    CHECK(make_run_directory("", "my prog!", started, parent.path()).path ==
          parent.path() + "/gpuleak-my_prog_-20261130-093012");

    // Removed only while empty, and only when the launcher made it.
    std::ofstream(second.path + "/trace") << "x";
    remove_if_unused(first);
    remove_if_unused(second);
    CHECK_FALSE(fs::exists(first.path));
    CHECK(fs::exists(second.path));
}

TEST_CASE("run -o DIR is made if missing, taken if empty, refused if it holds anything") {
    TempDir parent;
    const RunDirectory made = make_run_directory(parent.path() + "/a/b", "ls", 0);
    CHECK(made.created);
    CHECK(fs::is_directory(parent.path() + "/a/b"));
    const RunDirectory taken = make_run_directory(parent.path() + "/a/b", "ls", 0);
    CHECK_FALSE(taken.created);
    CHECK(taken.path == parent.path() + "/a/b");
    CHECK_THROWS_AS(make_run_directory(parent.path() + "/a", "ls", 0), LauncherError);
    std::ofstream(parent.path() + "/file") << "x";
    CHECK_THROWS_AS(make_run_directory(parent.path() + "/file", "ls", 0), LauncherError);
}

TEST_CASE(
    "a launch in a job of several tasks or machines gets a part of the job's directory, named by both") {
    const auto part = [](const std::vector<std::string>& command, const std::string& host,
                         const std::vector<std::string>& environment = {}) {
        const std::optional<JobPart> found = job_part(command, host, environment);
        return found ? found->name : "<none>";
    };
    const std::vector<std::string> python = {"python", "train.py"};
    // srun starts one gpuleak run per task.
    CHECK(part(python, "gpu-07",
               {"SLURM_JOB_ID=81234", "SLURM_STEP_ID=0", "SLURM_NTASKS=16", "SLURM_PROCID=9"}) ==
          "gpu-07.task9");
    // A batch script's own step, or a job of one task, is no job of several.
    CHECK(part(python, "gpu-07", {"SLURM_JOB_ID=81234", "SLURM_NTASKS=16", "SLURM_PROCID=0"}) == "<none>");
    CHECK(part(python, "gpu-07", {"SLURM_STEP_ID=0", "SLURM_NTASKS=1", "SLURM_PROCID=0"}) == "<none>");
    // torchrun for several machines, its node rank given or left to the rendezvous.
    CHECK(part({"torchrun", "--nnodes", "2", "--node-rank", "1", "train.py"}, "gpu-07") == "gpu-07.node1");
    CHECK(part({"/venv/bin/torchrun", "--nnodes=2", "--node_rank=0", "train.py"}, "gpu-07") ==
          "gpu-07.node0");
    CHECK(part({"torchrun", "--nnodes=1:4", "--rdzv-backend=c10d", "train.py"}, "gpu-07") == "gpu-07");
    CHECK(part({"python", "-m", "torch.distributed.run", "--nnodes", "4", "train.py"}, "a b") == "a_b");
    // One machine's torchrun, and a script's own --nnodes, are no job of several machines.
    CHECK(part({"torchrun", "--nproc-per-node", "8", "train.py"}, "gpu-07") == "<none>");
    CHECK(part({"torchrun", "--standalone", "train.py", "--nnodes", "3"}, "gpu-07") == "<none>");
    CHECK(part(python, "gpu-07") == "<none>");
}

TEST_CASE("a job's launches share -o DIR, each in a directory of its own") {
    TempDir parent;
    const std::string job = parent.path() + "/job";
    const RunDirectory first = make_job_run_directory(job, JobPart{"gpu-07.task0"});
    const RunDirectory second = make_job_run_directory(job, JobPart{"gpu-07.task1"});
    // A launch whose name another took (a second job step with the same tasks) gets one of its own.
    const RunDirectory again = make_job_run_directory(job, JobPart{"gpu-07.task0"});
    CHECK(first.path == job + "/gpu-07.task0");
    CHECK(second.path == job + "/gpu-07.task1");
    CHECK(again.path == job + "/gpu-07.task0-2");
    CHECK(first.created);
    CHECK((fs::status(first.path).permissions() & fs::perms::all) == fs::perms::owner_all);
    std::ofstream(parent.path() + "/file") << "x";
    CHECK_THROWS_AS(make_job_run_directory(parent.path() + "/file", JobPart{"gpu-07.task0"}), LauncherError);
}

TEST_CASE("signals go on to the command unless it has them already") {
    const pid_t child = 4242;
    // kill(2) from a user, a script, a job scheduler.
    CHECK(should_forward(signal_from(SI_USER, 1000), child, true));
    CHECK(should_forward(signal_from(SI_QUEUE, 1000), child, false));
    // The terminal signals its whole foreground process group: Ctrl-C once, not twice.
    CHECK_FALSE(should_forward(signal_from(SI_KERNEL, 0), child, true));
    CHECK(should_forward(signal_from(SI_KERNEL, 0), child, false));
    // The command signalling its own process group, the launcher included.
    CHECK_FALSE(should_forward(signal_from(SI_USER, child), child, true));
}

TEST_CASE("the OOM-kill count comes from cgroup v2's memory.events or v1's memory.oom_control") {
    TempDir root;
    fs::create_directories(root.path() + "/user.slice/run");
    std::ofstream(root.path() + "/user.slice/run/memory.events")
        << "low 0\nhigh 0\nmax 4\noom 2\noom_kill 1\n";
    CHECK(cgroup_oom_kills("0::/user.slice/run\n", root.path()) == 1u);
    fs::create_directories(root.path() + "/memory/job");
    std::ofstream(root.path() + "/memory/job/memory.oom_control")
        << "oom_kill_disable 0\nunder_oom 0\noom_kill 7\n";
    CHECK(cgroup_oom_kills("9:name=systemd:/\n4:memory:/job\n0::/\n", root.path()) == 7u);
    CHECK_FALSE(cgroup_oom_kills("0::/elsewhere\n", root.path()).has_value());
}

TEST_CASE("the kernel log's OOM-kill records are matched by pid") {
    CHECK(names_oom_kill("6,1234,5678,-;Out of memory: Killed process 4242 (python) total-vm:1kB", 4242));
    CHECK(names_oom_kill("3,9,9,-;Memory cgroup out of memory: Killed process 4242 (python) anon-rss:2kB",
                         4242));
    CHECK_FALSE(names_oom_kill("6,1234,5678,-;Out of memory: Killed process 42421 (python)", 4242));
    CHECK_FALSE(names_oom_kill("6,1,1,-;python[4242]: segfault at 0", 4242));
}

TEST_CASE("the summary says how the command ended, a SIGKILL weighed as an OOM kill") {
    CommandEnd end;
    end.name = "python";
    end.seconds = 2.5;
    end.wait_status = 3 << 8;
    CHECK(join(ending_lines(end)) == "python exited with status 3 after 2.5 s\n");
    end.wait_status = SIGTERM;
    CHECK(join(ending_lines(end)) == "python was killed by signal 15 (SIGTERM) after 2.5 s\n");
    // Who sent it, as the command's trace says.
    end.sender = "sent by pid 812 (slurmstepd)";
    CHECK(join(ending_lines(end)) ==
          "python was killed by signal 15 (SIGTERM) after 2.5 s: sent by pid 812 (slurmstepd)\n");
    end.sender.clear();

    end.wait_status = SIGKILL;
    end.oom_kills_before = 2;
    end.oom_kills_after = 3;
    CHECK(join(ending_lines(end)) ==
          "python was killed by SIGKILL after 2.5 s: the OOM killer (its memory cgroup "
          "counted 1 OOM kill during the run)\n");
    end.oom_kills_after = 2;
    end.kernel_log = KernelLogVerdict::Names;
    CHECK(join(ending_lines(end)).find(": the OOM killer (the kernel log says so)") != std::string::npos);
    end.kernel_log = KernelLogVerdict::Silent;
    CHECK(join(ending_lines(end))
              .find(": probably the OOM killer (not confirmed: its memory "
                    "cgroup counted no OOM kill") != std::string::npos);
    end.oom_kills_before.reset();
    end.oom_kills_after.reset();
    end.kernel_log = KernelLogVerdict::Unreadable;
    CHECK(
        join(ending_lines(end)).find("(not confirmed: neither a cgroup OOM-kill count nor the kernel log") !=
        std::string::npos);

    // A worker killed for memory, its parent ending on an error.
    end.wait_status = 1 << 8;
    end.oom_kills_before = 0;
    end.oom_kills_after = 2;
    CHECK(join(ending_lines(end)) ==
          "python exited with status 1 after 2.5 s\n"
          "the OOM killer killed 2 processes in this memory cgroup during the run\n");
}

TEST_CASE("what another user may plant in place of a file is neither read nor written") {
    TempDir dir;
    const std::string regular = dir.path() + "/regular";
    REQUIRE(gpuleak::write_regular_file(regular.c_str(), "text", 4, 0600) == 0);
    char buffer[16] = {};
    CHECK(gpuleak::read_regular_file_bytes(regular.c_str(), buffer, sizeof buffer) == 4);
    // Replaced whole, never overlaid: what had the old file open still reads it all, and nothing else is
    // left in the directory.
    const int old_file = ::open(regular.c_str(), O_RDONLY | O_CLOEXEC);
    REQUIRE(old_file >= 0);
    REQUIRE(gpuleak::write_regular_file(regular.c_str(), "ab", 2, 0600) == 0);
    CHECK(gpuleak::read_regular_file_bytes(regular.c_str(), buffer, sizeof buffer) == 2);
    CHECK(::pread(old_file, buffer, sizeof buffer, 0) == 4);
    ::close(old_file);
    CHECK(std::distance(std::filesystem::directory_iterator(dir.path()),
                        std::filesystem::directory_iterator()) == 1);

    const std::string link = dir.path() + "/link";
    std::filesystem::create_symlink(regular, link);
    CHECK(gpuleak::write_regular_file(link.c_str(), "x", 1, 0600) == ELOOP);
    CHECK(std::string(gpuleak::write_failure_text(ELOOP)) == "a symbolic link");
    CHECK(gpuleak::read_regular_file_bytes(link.c_str(), buffer, sizeof buffer) == 0);

    // Neither blocks on a FIFO, with or without a reader or a writer at its other end.
    const std::string fifo = dir.path() + "/fifo";
    REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
    CHECK(gpuleak::write_regular_file(fifo.c_str(), "x", 1, 0600) == gpuleak::kNotRegularFile);
    CHECK(gpuleak::read_regular_file_bytes(fifo.c_str(), buffer, sizeof buffer) == 0);
    const int reader = ::open(fifo.c_str(), O_RDONLY | O_NONBLOCK);
    REQUIRE(reader >= 0);
    CHECK(gpuleak::write_regular_file(fifo.c_str(), "x", 1, 0600) == gpuleak::kNotRegularFile);
    CHECK(std::string(gpuleak::write_failure_text(gpuleak::kNotRegularFile)) == "not a regular file");
    ::close(reader);

    // An existing file of the user's own gets the mode asked for; another user's is not written into.
    ::chmod(regular.c_str(), 0644);
    REQUIRE(gpuleak::write_regular_file(regular.c_str(), "ab", 2, 0600) == 0);
    CHECK((std::filesystem::status(regular).permissions() & std::filesystem::perms::all) ==
          (std::filesystem::perms::owner_read | std::filesystem::perms::owner_write));
    if (::chown(regular.c_str(), 65534, 65534) == 0) {
        CHECK(gpuleak::write_regular_file(regular.c_str(), "planted", 7, 0600) == gpuleak::kOtherUsersFile);
        CHECK(std::string(gpuleak::write_failure_text(gpuleak::kOtherUsersFile)) == "owned by another user");
        CHECK(std::filesystem::file_size(regular) == 2);
    }
}

TEST_CASE("a report written in parts replaces the old file only once whole, and one given up leaves it be") {
    TempDir dir;
    const std::string report = dir.path() + "/report.json";
    REQUIRE(gpuleak::write_regular_file(report.c_str(), "old", 3, 0600) == 0);
    const auto names = [&] {
        std::vector<std::string> found;
        for (const auto& entry : std::filesystem::directory_iterator(dir.path()))
            found.push_back(entry.path().filename().string());
        return found;
    };
    char buffer[16] = {};
    {
        gpuleak::ReplacingFile file(report.c_str(), 0600);
        // Nothing is made before the first part.
        CHECK_FALSE(file.started());
        CHECK(names() == std::vector<std::string>{"report.json"});
        REQUIRE(file.write("new ", 4) == 0);
        CHECK(file.started());
        // A reader meanwhile finds the old report, whole.
        CHECK(gpuleak::read_regular_file_bytes(report.c_str(), buffer, sizeof buffer) == 3);
        REQUIRE(file.write("one", 3) == 0);
        REQUIRE(file.commit() == 0);
    }
    CHECK(gpuleak::read_regular_file_bytes(report.c_str(), buffer, sizeof buffer) == 7);
    CHECK(std::string(buffer, 7) == "new one");
    CHECK(names() == std::vector<std::string>{"report.json"});
    {
        gpuleak::ReplacingFile file(report.c_str(), 0600);
        REQUIRE(file.write("cut sh", 6) == 0);
    }
    CHECK(gpuleak::read_regular_file_bytes(report.c_str(), buffer, sizeof buffer) == 7);
    CHECK(names() == std::vector<std::string>{"report.json"});
    // What write_regular_file refuses, refused at the first part, and that failure is what the file says
    // from then on: nothing more is written, nothing put in place.
    const std::string link = dir.path() + "/link";
    std::filesystem::create_symlink(report, link);
    gpuleak::ReplacingFile file(link.c_str(), 0600);
    CHECK(file.write("x", 1) == ELOOP);
    CHECK(file.write("y", 1) == ELOOP);
    CHECK(file.commit() == ELOOP);
    CHECK(std::filesystem::is_symlink(link));
}

TEST_CASE("a directory is trusted when it is the user's and writable by no one else, or sticky") {
    const TempDir dir;
    const std::string path = dir.path() + "/d";
    REQUIRE(::mkdir(path.c_str(), 0700) == 0);
    const auto distrust = [&](mode_t mode) {
        REQUIRE(::chmod(path.c_str(), mode) == 0);
        const gpuleak::FileDescriptor held(::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
        const char* why = gpuleak::directory_distrust(held.get());
        return why == nullptr ? std::string() : std::string(why);
    };
    CHECK(distrust(0700).empty());
    CHECK(distrust(0755).empty());
    CHECK(distrust(0777) == "writable by others than its owner");
    // With the sticky bit no one else can remove or rename what the user makes there: /tmp's kind.
    CHECK(distrust(01777).empty());
    // A umask of 002 makes directories writable by the user's private group: no one else is in it.
    const group* own = ::getgrgid(::getegid());
    const passwd* user = ::getpwuid(::geteuid());
    REQUIRE((own != nullptr && user != nullptr));
    bool private_group = true;
    for (char** member = own->gr_mem; *member != nullptr; ++member)
        private_group &= std::string(*member) == user->pw_name;
    REQUIRE(::chown(path.c_str(), ::geteuid(), ::getegid()) == 0);
    CHECK(distrust(0775) == (private_group ? "" : "writable by a group of other users"));
    // A group of others may write into it.
    if (::chown(path.c_str(), ::geteuid(), 65534) == 0) {
        CHECK(distrust(0775) == "writable by a group of other users");
        CHECK(distrust(0755).empty());
    } else {
        WARN("chown needs root here: a group of others not tested");
    }
    // Another user's, for a user who is not root.
    if (::geteuid() != 0)
        return;
    REQUIRE(::chown(path.c_str(), 65534, 65534) == 0);
    CHECK(distrust(0755).empty()); // root may write where a user's files are
    CHECK(distrust(0777) == "writable by others than its owner");
}

TEST_CASE("a command's Python interpreter is found by its name or by its #! line") {
    const TempDir dir;
    const fs::path bin = fs::path(dir.path()) / "bin";
    write_file(bin / "python3", "", kExecutable);
    write_file(bin / "python3.12", "", kExecutable);
    write_file(bin / "torchrun", "#!/opt/venv/bin/python3.12\nimport sys\n", kExecutable);
    write_file(bin / "accelerate", "#!/usr/bin/env -S python3 -u\n", kExecutable);
    write_file(bin / "with-setting", "#!/usr/bin/env -S PYTHONUNBUFFERED=1 python3\n", kExecutable);
    // Without -S, env gets "VAR=1 python3" as one argument: an assignment, and no program.
    write_file(bin / "one-argument", "#!/usr/bin/env PYTHONUNBUFFERED=1 python3\n", kExecutable);
    fs::copy_file("/proc/self/exe", bin / "cuda-app");
    write_file(bin / "tool.sh", "#!/bin/bash\nexec python3 \"$@\"\n", kExecutable);
    write_file(bin / "perl-tool", "#!/usr/bin/env perl\n", kExecutable);
    write_file(bin / "pythonista", "", kExecutable);
    const ScopedVariable path("PATH", bin.string());

    CHECK(python_of_command({"python3", "train.py"}) == (bin / "python3").string());
    CHECK(python_of_command({"python3.12", "-m", "torch.distributed.run", "train.py"}) ==
          (bin / "python3.12").string());
    CHECK(python_of_command({"/venv/bin/python", "train.py"}) == "/venv/bin/python");
    CHECK(python_of_command({"torchrun", "train.py"}) == "/opt/venv/bin/python3.12");
    CHECK(python_of_command({"accelerate", "launch"}) == (bin / "python3").string());
    CHECK(python_of_command({"with-setting"}) == (bin / "python3").string());
    CHECK(python_of_command({"one-argument"}) == std::nullopt);
    CHECK(python_of_command({"cuda-app"}) == std::nullopt);
    CHECK(python_of_command({(bin / "tool.sh").string()}) == std::nullopt);
    CHECK(python_of_command({"perl-tool"}) == std::nullopt);
    CHECK(python_of_command({"pythonista"}) == std::nullopt);
    CHECK(python_of_command({"no-such-program"}) == std::nullopt);
}

TEST_CASE("the torch an interpreter would import is named without importing it, and a failed adapter "
          "build leaves its log in the cache") {
    const TempDir dir;
    const fs::path root(dir.path());
    const fs::path torch = root / "site-packages" / "torch";
    write_file(torch / "version.py", "__version__ = '2.99.0+cu130'\ngit_version = 'abc'\n");
    // Any ELF file with a GNU build id stands in for libc10_cuda.so.
    fs::create_directories(torch / "lib");
    fs::copy_file("/proc/self/exe", torch / "lib" / "libc10_cuda.so");
    // Answers the launcher's question (where torch is: after a line a .pth file printed) and fails the
    // build script's (import torch), as an interpreter whose torch cannot be imported would.
    const fs::path python = root / "bin" / "python3";
    write_file(python,
               "#!/bin/sh\ncase \"$2\" in *find_spec*) echo 'from a .pth'; echo gpuleak-torch-directory:" +
                   torch.string() + " ;; *) echo 'ModuleNotFoundError: torch' >&2; exit 1 ;; esac\n",
               kExecutable);

    const std::optional<TorchInstall> found = torch_of(python.string());
    REQUIRE(found.has_value());
    CHECK(found->directory == torch.string());
    CHECK(found->version == "2.99.0+cu130");
    CHECK(found->build_id.size() >= 16);
    CHECK(found->build_id.find_first_not_of("0123456789abcdef") == std::string::npos);

    SECTION("the cache is GPULEAK_TORCH_ADAPTER_DIR, a failed build's output stays there") {
        const ScopedVariable cache("GPULEAK_TORCH_ADAPTER_DIR", (root / "cache").string());
        const AdapterBuild build = ensure_torch_adapter(python.string(), *found, false);
        CHECK_FALSE(build.built);
        const fs::path directory = root / "cache" / ("torch-2.99.0+cu130-" + found->build_id);
        CHECK(fs::path(build.library).parent_path() == directory);
        CHECK(fs::path(build.library).filename().string().starts_with("libgpuleak_torch-"));
        CHECK(fs::path(build.log).parent_path() == directory);
        CHECK(build.failure.find("cannot import torch") != std::string::npos);
        // The interpreter's own words are in the log too.
        std::ifstream log(build.log);
        CHECK(std::string(std::istreambuf_iterator<char>(log), {}).find("ModuleNotFoundError: torch") !=
              std::string::npos);
        CHECK_THROWS_WITH(torch_adapter_command(python.string()),
                          Catch::Contains("cannot build the PyTorch adapter for torch 2.99.0+cu130") &&
                              Catch::Contains(build.log));

        // One that is there is taken as it is: nothing runs.
        write_file(build.library, "");
        const AdapterBuild again = ensure_torch_adapter(python.string(), *found, false);
        CHECK(again.built);
        CHECK(again.library == build.library);
    }
    SECTION("a build is the installed build-adapter.sh's, whose adapter has the name the library looks for") {
        const ScopedVariable cache("GPULEAK_TORCH_ADAPTER_DIR", (root / "cache").string());
        // The script's questions answered as a torch install would, and a compiler that writes its -o.
        write_file(python,
                   "#!/bin/sh\ncase \"$2\" in *find_spec*) echo gpuleak-torch-directory:" + torch.string() +
                       " ;; *'import os, torch'*) echo 2.99.0+cu130 1 " + torch.string() + "/include " +
                       torch.string() + "/lib ;; *) exit 1 ;; esac\n",
                   kExecutable);
        const fs::path compiler = root / "bin" / "compiler";
        write_file(compiler,
                   "#!/bin/sh\nwhile [ $# -gt 0 ]; do [ \"$1\" = -o ] && echo adapter >\"$2\"; shift; done\n",
                   kExecutable);
        const ScopedVariable cxx("CXX", compiler.string());
        const AdapterBuild build = ensure_torch_adapter(python.string(), *found, false);
        CHECK(build.failure.empty());
        CHECK(build.built);
        CHECK(fs::is_regular_file(build.library));
        CHECK_FALSE(fs::exists(build.log));
    }
    SECTION("else under XDG_CACHE_HOME, else under ~/.cache") {
        const ScopedVariable cache("GPULEAK_TORCH_ADAPTER_DIR", std::nullopt);
        const ScopedVariable home("HOME", (root / "home").string());
        {
            const ScopedVariable xdg("XDG_CACHE_HOME", (root / "xdg").string());
            CHECK(ensure_torch_adapter(python.string(), *found, false)
                      .library.starts_with((root / "xdg" / "gpuleak" / "torch-adapter").string() +
                                           "/torch-2.99.0+cu130-"));
        }
        const ScopedVariable xdg("XDG_CACHE_HOME", std::nullopt);
        CHECK(ensure_torch_adapter(python.string(), *found, false)
                  .library.starts_with((root / "home" / ".cache" / "gpuleak" / "torch-adapter").string() +
                                       "/torch-2.99.0+cu130-"));
    }
    SECTION("a torch without CUDA has nothing to adapt; an interpreter without torch, no torch") {
        fs::remove(torch / "lib" / "libc10_cuda.so");
        CHECK(torch_of(python.string()) == std::nullopt);
        write_file(python, "#!/bin/sh\necho\n", kExecutable);
        CHECK(torch_of(python.string()) == std::nullopt);
        CHECK_THROWS_WITH(torch_adapter_command(python.string()),
                          Catch::Contains("imports no torch with CUDA"));
    }
}
