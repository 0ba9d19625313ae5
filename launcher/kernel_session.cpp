#include "launcher/kernel_session.h"

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fcntl.h>
#include <filesystem>
#include <fmt/format.h>
#include <optional>
#include <string_view>
#include <sys/stat.h>
#include <unistd.h>

#include "common/directory_trust.h"
#include "common/file_bytes.h"
#include "common/file_descriptor.h"
#include "common/printable.h"
#include "launcher/child_environment.h"
#include "launcher/child_process.h"
#include "launcher/child_trace_end.h"
#include "launcher/kernel_death.h"
#include "launcher/launcher_error.h"
#include "launcher/preload_library.h"
#include "launcher/python_package.h"
#include "launcher/run_directory.h"
#include "launcher/run_report.h"
#include "launcher/say.h"
#include "launcher/signal_forwarding.h"
#include "launcher/torch_adapter.h"
#include "read/trace_error.h"

namespace gpuleak::launcher {

namespace fs = std::filesystem;

namespace {

// The kernel directory's file naming the summary of a death the next kernel has not shown yet.
constexpr const char* kPendingFile = "previous-death";
constexpr const char* kSummaryFile = "kernel-death.txt";
// What the kernel reads to show that summary (python/gpuleak/_notebook.py).
constexpr const char* kPreviousDeathVariable = "GPULEAK_PREVIOUS_KERNEL_DEATH";

std::string environment_or(const char* name, const std::string& fallback) {
    const char* value = std::getenv(name);
    return value != nullptr && value[0] != '\0' ? std::string(value) : fallback;
}

// The user's state directory ($XDG_STATE_HOME, else ~/.local/state), and gpuleak's kernels' below it.
fs::path state_home() {
    fs::path state = environment_or("XDG_STATE_HOME", "");
    // The XDG base directory specification: a relative path is to be ignored.
    return state.is_absolute() ? state : fs::path(environment_or("HOME", "/")) / ".local" / "state";
}
constexpr const char* kKernelsLevels[] = {"gpuleak", "kernels"};

// A kernel's state directory, open: what the launcher reads there and writes there is in the directory it
// checked, whatever happens to its path meanwhile.
struct KernelDirectory {
    fs::path path;
    FileDescriptor handle{-1};
};

// $XDG_STATE_HOME/gpuleak/kernels/<key>, made or opened one level at a time from the one above, held open:
// each level the user's and 0700 (traces hold stacks, paths and cell sources), and no symbolic link
// among them.
KernelDirectory make_kernel_directory(const std::string& key) {
    const fs::path state = state_home();
    std::error_code error;
    fs::create_directories(state, error);
    KernelDirectory directory{state,
                              FileDescriptor(::open(state.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC))};
    if (directory.handle.get() < 0)
        throw LauncherError(fmt::format("cannot open {}: {}", state.string(), std::strerror(errno)));
    for (const char* level : {kKernelsLevels[0], kKernelsLevels[1], key.c_str()}) {
        directory.path /= level;
        if (::mkdirat(directory.handle.get(), level, 0700) != 0 && errno != EEXIST)
            throw LauncherError(
                fmt::format("cannot create {}: {}", directory.path.string(), std::strerror(errno)));
        directory.handle = FileDescriptor(
            ::openat(directory.handle.get(), level, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
        // A level of the user's own that others may write to (made by an earlier launcher under a umask
        // of 002) becomes the user's only.
        struct stat status {};
        if (directory.handle.get() >= 0 && ::fstat(directory.handle.get(), &status) == 0 &&
            status.st_uid == ::geteuid())
            ::fchmod(directory.handle.get(), 0700);
        const char* distrust = directory.handle.get() < 0 ? (errno == ELOOP || errno == ENOTDIR
                                                                 ? "not a directory but a link or a file"
                                                                 : std::strerror(errno))
                                                          : directory_distrust(directory.handle.get());
        if (distrust != nullptr)
            throw LauncherError(fmt::format("{}: the kernel's state directory is {}: others could read or "
                                            "replace its traces; remove it, or set XDG_STATE_HOME",
                                            directory.path.string(), distrust));
    }
    return directory;
}

// Takes the pending summary's path out of the kernel directory: it is shown once, by the next kernel.
// The summary the last kernel's launcher left for this one: a regular file in one of this kernel
// directory's runs, as that launcher wrote it; anything else there (a link, a FIFO, a path elsewhere)
// was not, and is not shown.
std::string take_pending_summary(const KernelDirectory& kernel) {
    char text[4096];
    const size_t size = read_regular_file_bytes_at(kernel.handle.get(), kPendingFile, text, sizeof text);
    ::unlinkat(kernel.handle.get(), kPendingFile, 0);
    const std::string_view content(text, size);
    const fs::path summary(std::string(content.substr(0, content.find('\n'))));
    const fs::path relative = summary.lexically_normal().lexically_relative(kernel.path.lexically_normal());
    struct stat status {};
    const bool inside = !relative.empty() && *relative.begin() != "..";
    return inside && ::fstatat(kernel.handle.get(), relative.c_str(), &status, AT_SYMLINK_NOFOLLOW) == 0 &&
                   S_ISREG(status.st_mode)
               ? summary.string()
               : std::string();
}

// 0600, as the report is written: `name` in the directory held open at `directory_fd`, at `directory`.
void write_private(int directory_fd, const fs::path& directory, const char* name, const std::string& text) {
    if (const int failure = write_regular_file_at(directory_fd, name, text.data(), text.size(), 0600);
        failure != 0)
        throw LauncherError(
            fmt::format("cannot write {}: {}", (directory / name).string(), write_failure_text(failure)));
}

// The post-mortem: the run's report, the summary beside it, and the kernel directory's pointer to it for
// the next kernel. Whatever fails here, the launcher still ends with the kernel's status.
void write_post_mortem(const CommandEnd& end, const RunDirectory& directory,
                       const KernelDirectory& kernel_directory) {
    std::optional<RunReport> report;
    std::string no_report;
    try {
        report = write_run_report(directory);
    } catch (const analyzer::TraceError& failure) {
        no_report = fmt::format("no report: {}; the traces are in {}", failure.what(), directory.path);
    } catch (const LauncherError& failure) {
        no_report = fmt::format("no report: {}; the traces are in {}", failure.what(), directory.path);
    }
    const std::vector<std::string> lines = death_summary(end, report ? &*report : nullptr, no_report);
    std::string text;
    for (const std::string& line : lines) {
        say_wrapped(line);
        text += printable(line) + "\n";
    }
    const fs::path summary = fs::path(directory.path) / kSummaryFile;
    try {
        write_private(directory.handle.get(), directory.path, kSummaryFile, text);
        write_private(kernel_directory.handle.get(), kernel_directory.path, kPendingFile,
                      summary.string() + "\n");
    } catch (const LauncherError& failure) {
        say(failure.what());
    }
}

} // namespace

std::string kernels_state_directory() {
    return (state_home() / kKernelsLevels[0] / kKernelsLevels[1]).string();
}

std::string kernel_key(const std::vector<std::string>& command, int pid) {
    for (size_t i = 0; i < command.size(); ++i) {
        std::string file;
        if ((command[i] == "-f" || command[i] == "--f") && i + 1 < command.size())
            file = command[i + 1];
        else if (command[i].starts_with("-f=") || command[i].starts_with("--f="))
            file = command[i].substr(command[i].find('=') + 1);
        std::string stem = fs::path(file).stem().string();
        if (!stem.empty() && stem[0] != '.')
            return stem;
    }
    return fmt::format("kernel-{}", pid);
}

int run_kernel(const RunRequest& request) {
    const std::string library = find_preload_library();
    const std::string package = find_python_package();
    prepare_torch_adapter(python_of_command(request.command), library, !request.quiet);
    const KernelDirectory kernel_directory = make_kernel_directory(kernel_key(request.command, ::getpid()));
    const std::string previous = take_pending_summary(kernel_directory);
    const RunDirectory directory =
        make_run_directory("", request.command[0], std::time(nullptr), kernel_directory.path.string());

    CommandEnd end;
    end.name = "the kernel";
    Supervision supervision(true);
    const auto started = std::chrono::steady_clock::now();
    try {
        std::vector<std::string> environment = child_environment(
            process_environment(), library, output_pattern(directory.path), request, package);
        set_variable(environment, "PYTHONPATH", python_path(package, variable(environment, "PYTHONPATH")));
        // Named by this launcher or by none: a value inherited from elsewhere would have the kernel
        // show whatever file it names.
        if (previous.empty())
            unset_variable(environment, kPreviousDeathVariable);
        else
            set_variable(environment, kPreviousDeathVariable, previous);
        end.oom_kills_before = cgroup_oom_kills();
        end.pid = start_command(request.command, environment, supervision, true);
    } catch (const LauncherError&) {
        remove_if_unused(directory);
        throw;
    }
    end.wait_status = supervision.wait_forwarding(end.pid);
    end.monotonic_ns = monotonic_now_ns();
    end.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    const int status = exit_status_of(end.wait_status);
    if (!kernel_died(end.wait_status)) {
        // Shut down or restarted on request: nothing to explain, and Jupyter waits for the launcher.
        remove_if_unused(directory);
        return status;
    }
    end.oom_kills_after = cgroup_oom_kills();
    if (killed_by_sigkill(end))
        end.kernel_log = kernel_log_oom_kill(end.pid);
    // A restart or a shutdown the kernel, busy, did not answer in time, as Jupyter signals it: asked for,
    // no death to explain.
    if (record_how_child_ended(end, directory, supervision, true))
        return status;
    supervision.exit_on_signal(
        fmt::format("gpuleak: interrupted before the kernel's report was written; the traces are in {}",
                    printable(directory.path)),
        status);
    write_post_mortem(end, directory, kernel_directory);
    return status;
}

} // namespace gpuleak::launcher
