#include "launcher/attach_command.h"

#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fmt/format.h>
#include <fstream>
#include <map>
#include <sstream>
#include <thread>
#include <unistd.h>

#include "launcher/captured_run.h"
#include "launcher/interruption.h"
#include "launcher/launcher_error.h"
#include "launcher/preload_library.h"
#include "launcher/run_directory.h"
#include "launcher/run_report.h"
#include "launcher/run_summary.h"
#include "launcher/say.h"
#include "launcher/shared_files.h"
#include "launcher/torch_adapter.h"
#include "read/trace_error.h"
#include "read/trace_set.h"

namespace gpuleak::launcher {

namespace fs = std::filesystem;

namespace {

constexpr int kCannotAttach = 2;
// gdb loads the process's C library symbols and waits for one of its threads to call malloc: seconds,
// unless the process is stopped or blocked for good.
constexpr std::chrono::seconds kGdbLimit{120};
constexpr int kCapSysPtrace = 19;

[[noreturn]] void refuse(int32_t pid, const std::string& why) {
    throw LauncherError(fmt::format("attach: pid {}: {}", pid, why), kCannotAttach);
}

std::string read_text(const fs::path& path) {
    std::ifstream file(path);
    std::stringstream text;
    text << file.rdbuf();
    return text.str();
}

// A field of /proc/PID/status ("Uid", "CapEff"): the text after its colon; empty where it has none.
std::string status_field(const std::string& status, const std::string& name) {
    const std::string key = "\n" + name + ":";
    const size_t at = ("\n" + status).find(key);
    if (at == std::string::npos)
        return {};
    const size_t start = at + key.size() - 1;
    const size_t end = status.find('\n', start);
    return status.substr(start, end == std::string::npos ? std::string::npos : end - start);
}

// The owner (real uid) of process `pid`; none where it is gone.
std::optional<uid_t> owner_of(int32_t pid) {
    const std::string status = read_text(fmt::format("/proc/{}/status", pid));
    if (status.empty())
        return std::nullopt;
    return static_cast<uid_t>(std::strtoul(status_field(status, "Uid").c_str(), nullptr, 10));
}

bool may_trace_anyone() {
    const std::string capabilities = status_field(read_text("/proc/self/status"), "CapEff");
    const uint64_t effective = std::strtoull(capabilities.c_str(), nullptr, 16);
    return (effective >> kCapSysPtrace & 1u) != 0;
}

// The refusals that need no gdb: a process that is gone, another user's, one ptrace may not reach here,
// or one recorded already.
void check_reachable(int32_t pid) {
    if (pid == ::getpid() || pid == ::getppid())
        refuse(pid, "that is gpuleak attach itself, or the shell that started it");
    const std::optional<uid_t> owner = owner_of(pid);
    if (!owner)
        refuse(pid, "no such process");
    const bool privileged = may_trace_anyone();
    if (*owner != ::geteuid() && !privileged)
        refuse(pid, fmt::format("another user's process (uid {}): attach as that user, or as root", *owner));
    const std::string scope_text = read_text("/proc/sys/kernel/yama/ptrace_scope");
    const int scope = scope_text.empty() ? 0 : std::atoi(scope_text.c_str());
    if (scope == 3)
        refuse(pid, "ptrace is switched off on this machine (/proc/sys/kernel/yama/ptrace_scope is 3, "
                    "until it reboots): gpuleak attach cannot reach a running process here");
    if ((scope == 1 || scope == 2) && !privileged)
        refuse(pid, fmt::format("ptrace reaches only a process's own children here "
                                "(/proc/sys/kernel/yama/ptrace_scope is {}): allow it with `sudo sysctl "
                                "kernel.yama.ptrace_scope=0`, or give gpuleak attach CAP_SYS_PTRACE (run it "
                                "with sudo)",
                                scope));
    try {
        const std::string trace = analyzer::trace_written_by(pid);
        if (!analyzer::traces_still_written({trace}).empty())
            refuse(pid,
                   fmt::format("recorded already, into {}: follow it with `gpuleak watch {}`", trace, pid));
    } catch (const analyzer::TraceError&) {
        // Not recorded (a trace an earlier attach ended may still be mapped: that one has ended).
    }
}

std::string find_gdb() {
    const char* named = std::getenv("GPULEAK_GDB");
    const std::string wanted = named != nullptr && named[0] != '\0' ? named : "gdb";
    if (std::optional<std::string> gdb = find_program(wanted); gdb && ::access(gdb->c_str(), X_OK) == 0)
        return *gdb;
    throw LauncherError(
        named != nullptr && named[0] != '\0'
            ? fmt::format("attach: GPULEAK_GDB={} is not an executable program", wanted)
            : std::string("attach: gdb is not installed: gpuleak attach loads gpuleak into the "
                          "process with it (apt-get install gdb, or dnf install gdb)"),
        kCannotAttach);
}

// A Python string literal of `text` for gdb's Python.
std::string python_literal(const std::string& text) {
    std::string literal = "'";
    for (const char c : text) {
        if (c == '\\' || c == '\'')
            literal += '\\';
        literal += c;
    }
    return literal + "'";
}

struct GdbAnswer {
    std::optional<std::string> python;
    std::optional<int> result;
    bool not_python = false;
    bool ended = false;
    std::string failure; // what gdb or the loader said went wrong
};

// Runs attach_gdb.py in gdb on the process, for `action` ("attach" or "detach").
GdbAnswer run_gdb(const std::string& gdb, int32_t pid, const std::string& action, const std::string& library,
                  const RunDirectory& directory, const std::string& output, const std::string& log) {
    std::string why;
    const std::optional<std::string> scripts = find_shared("launcher", "attach_gdb.py", why);
    if (!scripts)
        throw LauncherError(fmt::format("attach: gdb's script not found: {}", why), kCannotAttach);
    const std::string request =
        fmt::format("python gpuleak = {{'action': {}, 'library': {}, 'output': {}, 'log': {}, 'oldest': {}, "
                    "'newest': {}}}",
                    python_literal(action), python_literal(library), python_literal(output),
                    python_literal(log), kOldestPythonMinor, kNewestPythonMinor);
    // What gdb says when it cannot attach ("ptrace: Operation not permitted.") goes to its stderr.
    const std::string errors = (fs::path(directory.path) / "gdb-stderr.txt").string();
    const CapturedRun run = run_captured({gdb, "-nx", "-batch", "-iex", "set auto-solib-add off", "-iex",
                                          "set debuginfod enabled off", "-p", std::to_string(pid), "-ex",
                                          "sharedlibrary libc\\.so", "-ex", "sharedlibrary libpython", "-ex",
                                          request, "-x", (fs::path(*scripts) / "attach_gdb.py").string()},
                                         errors, kGdbLimit);
    GdbAnswer answer;
    std::istringstream lines(run.output + read_text(errors));
    std::error_code error;
    fs::remove(errors, error);
    constexpr std::string_view kPrefix = "gpuleak-attach: ";
    for (std::string line; std::getline(lines, line);) {
        if (line.rfind(kPrefix, 0) != 0) {
            // gdb's own word when it cannot attach: "ptrace: Operation not permitted."
            if (line.rfind("ptrace:", 0) == 0 && answer.failure.empty())
                answer.failure = line;
            continue;
        }
        const std::string rest = line.substr(kPrefix.size());
        const size_t space = rest.find(' ');
        const std::string key = rest.substr(0, space);
        const std::string value = space == std::string::npos ? std::string() : rest.substr(space + 1);
        if (key == "python")
            answer.python = value;
        else if (key == "result")
            answer.result = std::atoi(value.c_str());
        else if (key == "not-python")
            answer.not_python = true;
        else if (key == "ended")
            answer.ended = true;
        else if (key == "no-library" || key == "gdb-error")
            answer.failure = value;
    }
    if (run.timed_out)
        answer.failure =
            fmt::format("none of its threads called malloc within {} s (is it stopped, or blocked "
                        "in a system call?)",
                        kGdbLimit.count());
    else if (!answer.python && !answer.not_python && answer.failure.empty())
        answer.failure = "gdb could not attach to it";
    return answer;
}

// The program's name as its directory is named after it (gpuleak-python3.12-20261207-093012).
std::string process_name(int32_t pid) {
    std::string name = read_text(fmt::format("/proc/{}/comm", pid));
    while (!name.empty() && (name.back() == '\n' || name.back() == ' '))
        name.pop_back();
    return name.empty() ? std::string("process") : name;
}

// The variables of the program's environment, as it started, by name.
std::map<std::string, std::string> environment_of(int32_t pid) {
    std::map<std::string, std::string> variables;
    std::istringstream entries(read_text(fmt::format("/proc/{}/environ", pid)));
    for (std::string entry; std::getline(entries, entry, '\0');)
        if (const size_t equals = entry.find('='); equals != std::string::npos)
            variables[entry.substr(0, equals)] = entry.substr(equals + 1);
    return variables;
}

// The torch directory of the libc10_cuda.so the program maps, if it maps one.
std::optional<fs::path> torch_loaded_by(int32_t pid) {
    std::istringstream maps(read_text(fmt::format("/proc/{}/maps", pid)));
    for (std::string line; std::getline(maps, line);) {
        const size_t slash = line.find('/');
        if (slash == std::string::npos)
            continue;
        const fs::path path = line.substr(slash);
        if (path.filename() == "libc10_cuda.so" && path.parent_path().filename() == "lib")
            return path.parent_path().parent_path();
    }
    return std::nullopt;
}

// PyTorch's tensors come through the adapter, which the program finds in its cache: made there before
// the attach when missing, as gpuleak run makes it before the program starts. It is built with an
// interpreter that imports the program's torch (its command's, its environment's, its executable), into
// the cache the program's own environment names.
// Not for another user's program (root attaching): its cache is not this user's to write.
void prepare_adapter(int32_t pid, const std::string& library) {
    const std::optional<fs::path> torch = torch_loaded_by(pid);
    if (!torch || owner_of(pid) != ::geteuid())
        return;
    const std::map<std::string, std::string> variables = environment_of(pid);
    for (const char* name : {"GPULEAK_TORCH", "GPULEAK_TORCH_ADAPTER_DIR", "XDG_CACHE_HOME", "HOME"}) {
        const auto found = variables.find(name);
        if (found != variables.end())
            ::setenv(name, found->second.c_str(), 1);
        else
            ::unsetenv(name);
    }
    std::vector<std::string> candidates;
    const std::string command = read_text(fmt::format("/proc/{}/cmdline", pid));
    if (const std::string first = command.substr(0, command.find('\0')); first.starts_with('/'))
        candidates.push_back(first);
    // <prefix>/lib/pythonX.Y/site-packages/torch: a virtual environment's or an installation's prefix.
    for (const char* name : {"python3", "python"})
        candidates.push_back(
            (torch->parent_path().parent_path().parent_path().parent_path() / "bin" / name).string());
    std::error_code error;
    candidates.push_back(fs::read_symlink(fmt::format("/proc/{}/exe", pid), error).string());
    for (const std::string& python : candidates) {
        try {
            const std::optional<TorchInstall> found = python.empty() ? std::nullopt : torch_of(python);
            if (found && fs::equivalent(found->directory, *torch, error)) {
                prepare_torch_adapter(python, library, true);
                return;
            }
        } catch (const LauncherError&) {
            // Not an interpreter of that torch: the next candidate.
        }
    }
}

bool process_alive(int32_t pid) {
    return ::kill(pid, 0) == 0 || errno == EPERM;
}

// Until the duration has passed, an interrupt, or the process ended: whether it still runs.
bool wait_while_recording(int32_t pid, const std::optional<double>& duration) {
    const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(duration.value_or(0));
    while (!interrupted() && (!duration || std::chrono::steady_clock::now() < until)) {
        if (!process_alive(pid))
            return false;
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return process_alive(pid);
}

void report_on(const RunDirectory& directory, int32_t pid, const std::string& name) {
    CommandEnd end;
    end.name = name;
    end.pid = pid;
    try {
        RunReport report = write_run_report(directory);
        for (const std::string& line : report_lines(end, report))
            say_wrapped(line);
    } catch (const analyzer::TraceError& failure) {
        say(fmt::format("no report: {}; the traces are in {}", failure.what(), directory.path));
    }
}

} // namespace

int attach_command(const AttachRequest& request) {
    const int32_t pid = request.pid;
    if (pid <= 0)
        refuse(pid, "not a process id");
    check_reachable(pid);
    const std::string gdb = find_gdb();
    const std::string library = find_preload_library();
    const std::string name = process_name(pid);
    prepare_adapter(pid, library);
    const RunDirectory directory = make_run_directory(request.output_directory, name, std::time(nullptr));
    const std::string output = (fs::path(directory.path) / "gpuleak.%p.trace").string();
    const std::string log = (fs::path(directory.path) / "attach.log").string();
    const GdbAnswer attached = run_gdb(gdb, pid, "attach", library, directory, output, log);
    const auto give_up = [&](const std::string& why) {
        std::error_code error;
        fs::remove(log, error);
        remove_if_unused(directory);
        refuse(pid, why);
    };
    if (attached.not_python)
        give_up("not a Python program (no CPython in it): gpuleak attach records Python programs");
    if (attached.python && !attached.result)
        give_up(attached.failure.empty()
                    ? fmt::format("Python {}: gpuleak attach reads CPython 3.{} to 3.{}", *attached.python,
                                  kOldestPythonMinor, kNewestPythonMinor)
                    : attached.failure);
    if (attached.ended)
        give_up("it ended before gpuleak could be loaded into it");
    if (!attached.result) {
        const bool denied = attached.failure.find("Operation not permitted") != std::string::npos;
        give_up(denied ? "ptrace is not permitted here (a container without CAP_SYS_PTRACE, or "
                         "/proc/sys/kernel/yama/ptrace_scope): run gpuleak attach with CAP_SYS_PTRACE"
                       : attached.failure);
    }
    if (*attached.result == 1)
        give_up(fmt::format("recorded already: follow it with `gpuleak watch {}`", pid));
    if (*attached.result != 0)
        give_up(fmt::format("gpuleak could not start recording it: {}", read_text(log)));

    notice_interruptions();
    say(fmt::format("recording pid {} ({}) into {}{}", pid, name, directory.path,
                    request.duration ? fmt::format(" for {:g} s", *request.duration)
                                     : std::string(" until Ctrl-C or its end")));
    if (wait_while_recording(pid, request.duration)) {
        const GdbAnswer detached = run_gdb(gdb, pid, "detach", library, directory, "", "");
        if (detached.result != 0 && process_alive(pid))
            say(fmt::format("could not stop recording pid {} ({}): it records on into {} until it ends", pid,
                            detached.failure.empty() ? "gdb did not reach it" : detached.failure,
                            directory.path));
    }
    // What libgpuleak.so said inside the program (a missing PyTorch adapter, say) is said here, where the
    // program's stderr would have shown it under gpuleak run; the file stays with the report.
    const std::string said = read_text(log);
    std::error_code error;
    if (said.empty())
        fs::remove(log, error);
    std::fwrite(said.data(), 1, said.size(), stderr);
    report_on(directory, pid, name);
    return 0;
}

} // namespace gpuleak::launcher
