#include "launcher/run_command.h"

#include <chrono>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fmt/format.h>
#include <optional>
#include <unistd.h>

#include "common/printable.h"
#include "launcher/child_environment.h"
#include "launcher/child_process.h"
#include "launcher/child_trace_end.h"
#include "launcher/launcher_error.h"
#include "launcher/preload_library.h"
#include "launcher/python_package.h"
#include "launcher/run_directory.h"
#include "launcher/run_summary.h"
#include "launcher/say.h"
#include "launcher/signal_forwarding.h"
#include "launcher/torch_adapter.h"
#include "read/trace_error.h"
#include "render/diagnosis_text.h"

namespace gpuleak::launcher {

namespace {

// How the command ended, then what the report says. The report is gpuleak's business: whatever goes wrong
// in it, the launcher still ends with the command's status, and says where the traces are.
void report_on(CommandEnd& end, const RunDirectory& directory) {
    std::error_code error;
    if (std::filesystem::is_empty(directory.path, error) && !error) {
        for (const std::string& line : ending_lines(end))
            say_wrapped(line);
        say("no process of the run allocated GPU memory: nothing was recorded");
        remove_if_unused(directory);
        return;
    }
    std::optional<RunReport> report;
    std::string no_report;
    try {
        report = write_run_report(directory);
    } catch (const analyzer::TraceError& failure) {
        no_report = fmt::format("no report: {}; the traces are in {}", failure.what(), directory.path);
    } catch (const LauncherError& failure) {
        no_report = fmt::format("no report: {}; the traces are in {}", failure.what(), directory.path);
    } catch (const std::exception& failure) {
        no_report = fmt::format("no report: internal error: {}; the traces are in {}", failure.what(),
                                directory.path);
    }
    if (report)
        if (const analyzer::ProcessReport* own = command_process(end, report->processes.all()))
            end.sender = analyzer::sender_text(own->model);
    for (const std::string& line : ending_lines(end))
        say_wrapped(line);
    if (!report) {
        say(no_report);
        return;
    }
    for (const std::string& line : report_lines(end, *report))
        say_wrapped(line);
}

} // namespace

int run_command(const RunRequest& request) {
    const std::string library = find_preload_library();
    prepare_torch_adapter(python_of_command(request.command), library, !request.quiet);
    // In a job of several machines or tasks that share -o DIR, each launch runs in a part of its own.
    const std::optional<JobPart> part =
        request.output_directory.empty() ? std::nullopt
                                         : job_part(request.command, machine_name(), process_environment());
    const RunDirectory directory =
        part ? make_job_run_directory(request.output_directory, *part)
             : make_run_directory(request.output_directory, request.command[0], std::time(nullptr));
    CommandEnd end;
    // By its name, as its user typed it ("python"), not the path a virtual environment gave it.
    end.name = std::filesystem::path(request.command[0]).filename().string();
    if (end.name.empty())
        end.name = request.command[0];
    pid_t child = 0;
    Supervision supervision;
    const auto started = std::chrono::steady_clock::now();
    try {
        const std::vector<std::string> environment =
            child_environment(process_environment(), library, output_pattern(directory.path), request,
                              python_package_if_any().value_or(""));
        end.oom_kills_before = cgroup_oom_kills();
        child = start_command(request.command, environment, supervision);
    } catch (const LauncherError&) {
        remove_if_unused(directory);
        throw;
    }
    end.pid = child;
    end.wait_status = supervision.wait_forwarding(child);
    end.monotonic_ns = monotonic_now_ns();
    end.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    const int status = exit_status_of(end.wait_status);
    supervision.exit_on_signal(
        fmt::format("gpuleak: interrupted before the report was written; the traces are in {}",
                    printable(directory.path)),
        status);

    end.oom_kills_after = cgroup_oom_kills();
    if (killed_by_sigkill(end))
        end.kernel_log = kernel_log_oom_kill(child);
    record_how_child_ended(end, directory, supervision, false);
    report_on(end, directory);
    return status;
}

} // namespace gpuleak::launcher
