#include "launcher/run_summary.h"

#include <algorithm>
#include <csignal>
#include <cstring>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <sys/wait.h>

#include "model/diagnosis.h"
#include "render/byte_sizes.h"
#include "render/diagnosis_text.h"

namespace gpuleak::launcher {

namespace {

using analyzer::DiagnosisKind;
using analyzer::human_bytes;
using analyzer::ProcessReport;

std::string plural(uint64_t count, const std::string& noun) {
    const bool sibilant = noun.back() == 's';
    return fmt::format("{} {}{}", count, noun, count == 1 ? "" : sibilant ? "es" : "s");
}

std::optional<uint64_t> oom_kills_during(const CommandEnd& end) {
    if (!end.oom_kills_before || !end.oom_kills_after || *end.oom_kills_after <= *end.oom_kills_before)
        return std::nullopt;
    return *end.oom_kills_after - *end.oom_kills_before;
}

std::string sigkill_cause(const CommandEnd& end) {
    if (const auto kills = oom_kills_during(end))
        return fmt::format("the OOM killer (its memory cgroup counted {} during the run)",
                           plural(*kills, "OOM kill"));
    if (end.kernel_log == KernelLogVerdict::Names)
        return "the OOM killer (the kernel log says so)";
    std::string reason;
    if (end.oom_kills_before && end.oom_kills_after)
        reason = "its memory cgroup counted no OOM kill during the run, so something else may have sent it";
    else if (end.kernel_log == KernelLogVerdict::Unreadable)
        reason = "neither a cgroup OOM-kill count nor the kernel log can be read here";
    else
        reason = "the kernel log does not name it";
    return fmt::format("probably the OOM killer (not confirmed: {})", reason);
}

uint64_t peak_reserved(const ProcessReport& process) {
    uint64_t total = 0;
    for (const analyzer::DeviceSummary& device : process.model.devices)
        total += device.peak_reserved;
    return total;
}

uint64_t peak_allocated(const ProcessReport& process) {
    uint64_t total = 0;
    for (const analyzer::DeviceSummary& device : process.model.devices)
        total += device.peak_allocated;
    return total;
}

// Lower is more serious: what the user must fix first, down to memory gpuleak cannot attribute.
int seriousness(DiagnosisKind kind) {
    switch (kind) {
    case DiagnosisKind::Leak:
        return 0;
    case DiagnosisKind::PoolExhausted:
        return 1;
    case DiagnosisKind::CacheGrowth:
        return 2;
    case DiagnosisKind::HostRamGrowth:
        return 3;
    case DiagnosisKind::OutsideAllocators:
        return 4;
    case DiagnosisKind::Incomplete:
        return 5;
    case DiagnosisKind::Stable:
        break;
    }
    return 6;
}

// The process the summary's diagnosis is about: of those that used the GPU (if any did), the most
// serious diagnosis, of those the process that reserved the most. The others' host memory follows in
// lines of its own; the report has every process's.
ProcessReport& focus_process(std::vector<ProcessReport>& processes) {
    const bool any_gpu = std::any_of(processes.begin(), processes.end(), [](const ProcessReport& process) {
        return !process.model.header.host_only();
    });
    return *std::min_element(processes.begin(), processes.end(),
                             [any_gpu](const ProcessReport& a, const ProcessReport& b) {
                                 if (any_gpu && a.model.header.host_only() != b.model.header.host_only())
                                     return !a.model.header.host_only();
                                 if (a.diagnosis.kind != b.diagnosis.kind)
                                     return seriousness(a.diagnosis.kind) < seriousness(b.diagnosis.kind);
                                 return peak_reserved(a) > peak_reserved(b);
                             });
}

// The last timeline sample of the command's own trace.
std::optional<std::string> last_samples(const CommandEnd& end, analyzer::ReportSet& processes) {
    const ProcessReport* listed = command_process(end, processes.all());
    if (listed == nullptr)
        return std::nullopt;
    const ProcessReport& own = processes.whole(static_cast<size_t>(listed - processes.all().data()));
    if (own.model.timeline.empty())
        return std::nullopt;
    const analyzer::TimelinePoint& last = own.model.timeline.back();
    const std::string rss = last.rss ? fmt::format("host RSS {}, ", human_bytes(*last.rss)) : std::string();
    return fmt::format("last samples, at {:.1f} s: {}device memory reserved {}, allocated {}",
                       analyzer::seconds_of(last.time_ns), rss, human_bytes(last.reserved),
                       human_bytes(last.allocated));
}

// What the program's exit freed was still held as its code ended (ProcessModel::code_end_ns).
std::string site_text(ProcessReport& process, const analyzer::LeakSite& site) {
    const std::string pool = site.pool != analyzer::PoolOwner::None
                                 ? " (" + analyzer::pool_purpose(site.pool) + ")"
                                 : std::string();
    return fmt::format("{}{}: {} in {} {}", process.stacks->describe(site.stack_id), pool,
                       human_bytes(site.bytes), plural(site.count, "allocation"),
                       process.model.code_end_ns ? "still held as its code ended" : "still alive");
}

// The diagnosis's own top site when it found a leak; without one, the site the program holds the most
// in at the end (not a sub-allocator's segments, which hold what its cache keeps), named for what it is.
std::optional<std::string> top_leak_origin(ProcessReport& process) {
    const analyzer::ProcessModel& model = process.model;
    if (const auto& leak = process.diagnosis.leak) {
        const analyzer::LeakSite& site = model.leak_sites[leak->sites.front()];
        if (leak->cause == analyzer::LeakCause::KeptForBackward)
            return fmt::format("top leak origin: {}, held at exit by an autograd graph no backward() used",
                               site_text(process, site));
        if (leak->cause == analyzer::LeakCause::SpentGraphs)
            return fmt::format("top leak origin: {}, a tensor that keeps the autograd graphs of every step",
                               site_text(process, site));
        return fmt::format("top leak origin: {}, made through {:.0f}% of the program's work",
                           site_text(process, site), 100 * site.program_share);
    }
    // What an attach found held already is not where anything was made: the largest site it saw made.
    const auto held =
        std::find_if(model.leak_sites.begin(), model.leak_sites.end(),
                     [](const analyzer::LeakSite& site) { return !site.segments && !site.before_attach; });
    if (held == model.leak_sites.end())
        return std::nullopt;
    return fmt::format("most held {}: {}", model.code_end_ns ? "as its code ended" : "at the end",
                       site_text(process, *held));
}

} // namespace

const ProcessReport* command_process(const CommandEnd& end, const std::vector<ProcessReport>& processes) {
    const ProcessReport* own = nullptr;
    for (const ProcessReport& process : processes)
        if (process.model.header.pid == end.pid &&
            (own == nullptr || process.model.header.start_realtime_ns > own->model.header.start_realtime_ns))
            own = &process;
    return own;
}

bool killed_by_sigkill(const CommandEnd& end) {
    return WIFSIGNALED(end.wait_status) && WTERMSIG(end.wait_status) == SIGKILL;
}

bool oom_kill_confirmed(const CommandEnd& end) {
    return oom_kills_during(end).has_value() || end.kernel_log == KernelLogVerdict::Names;
}

std::vector<std::string> ending_lines(const CommandEnd& end) {
    std::vector<std::string> lines;
    if (WIFEXITED(end.wait_status)) {
        lines.push_back(fmt::format("{} exited with status {} after {:.1f} s", end.name,
                                    WEXITSTATUS(end.wait_status), end.seconds));
    } else if (killed_by_sigkill(end)) {
        lines.push_back(fmt::format("{} was killed by SIGKILL after {:.1f} s: {}", end.name, end.seconds,
                                    sigkill_cause(end)));
    } else {
        const int signal_number = WTERMSIG(end.wait_status);
        const char* name = sigabbrev_np(signal_number);
        lines.push_back(fmt::format("{} was killed by signal {} (SIG{}){} after {:.1f} s{}", end.name,
                                    signal_number, name != nullptr ? name : "?",
                                    WCOREDUMP(end.wait_status) ? ", core dumped" : "", end.seconds,
                                    end.sender.empty() ? std::string() : ": " + end.sender));
    }
    // A worker killed for memory often shows only as an error in its parent.
    if (const auto kills = oom_kills_during(end); kills && !killed_by_sigkill(end))
        lines.push_back(fmt::format("the OOM killer killed {} in this memory cgroup during the run",
                                    plural(*kills, "process")));
    return lines;
}

namespace {

std::vector<std::string> summary_lines(const CommandEnd& end, RunReport& report) {
    std::vector<ProcessReport>& processes = report.processes.all();
    std::vector<std::string> lines;
    // What ended a program that failed, first: it is what its author ran it for.
    for (const ProcessReport& process : processes) {
        const std::string who =
            processes.size() > 1 ? fmt::format("pid {}", process.model.header.pid) : "the program";
        if (process.model.error)
            lines.push_back(fmt::format("{} ended with {}", who,
                                        analyzer::program_error_text(process.model, *process.model.error)));
        // A notebook's kernel: the last cell that failed.
        if (!process.model.cell_errors.empty())
            lines.push_back((processes.size() > 1 ? who + ": " : std::string()) +
                            analyzer::cell_errors_text(process.model));
    }
    // The GPU processes a signal ended, other than the command (its ending line said it): a rank its
    // launcher stopped, a script under `timeout` or a job's step.
    constexpr size_t kMostSignalLines = 4;
    size_t signalled = 0;
    for (const ProcessReport& process : processes) {
        const analyzer::ProcessModel& model = process.model;
        if (model.header.pid == end.pid || model.header.host_only() ||
            model.header.end.state != format::EndState::Signaled)
            continue;
        if (++signalled > kMostSignalLines)
            continue;
        const std::string role = analyzer::role_text(model.role);
        lines.push_back(fmt::format("pid {}{} was {}", model.header.pid,
                                    role.empty() ? std::string() : " (" + role + ")",
                                    analyzer::ended_text(model)));
    }
    if (signalled > kMostSignalLines)
        lines.push_back(fmt::format("{} more were killed by signals: see the report",
                                    plural(signalled - kMostSignalLines, "process")));
    if (killed_by_sigkill(end))
        if (auto samples = last_samples(end, report.processes))
            lines.push_back(*samples);

    const bool several = processes.size() > 1;
    const bool simulated = std::any_of(processes.begin(), processes.end(), [](const ProcessReport& process) {
        return process.model.header.simulated_device();
    });
    const ProcessReport& largest = *std::max_element(
        processes.begin(), processes.end(),
        [](const ProcessReport& a, const ProcessReport& b) { return peak_reserved(a) < peak_reserved(b); });
    lines.push_back(
        fmt::format("{} traced{}; peak reserved {}, allocated {}{}", plural(processes.size(), "process"),
                    simulated ? " (simulated CUDA device: no real GPU was used)" : "",
                    human_bytes(peak_reserved(largest)), human_bytes(peak_allocated(largest)),
                    several ? fmt::format(" (pid {}, the most of any)", largest.model.header.pid) : ""));

    const ProcessReport& focus_listed = focus_process(processes);
    // Its diagnosis is told from its whole report.
    ProcessReport& focus = report.processes.whole(static_cast<size_t>(&focus_listed - processes.data()));
    // What makes those figures and the verdict less than exact, beside them.
    for (const ProcessReport& process : processes)
        for (const std::string& note : analyzer::exactness_notes(process.model))
            lines.push_back(fmt::format(
                "not exact{}: {}", several ? fmt::format(" (pid {})", process.model.header.pid) : "", note));
    lines.push_back(fmt::format("diagnosis{}: {}: {}",
                                several ? fmt::format(" of pid {}", focus.model.header.pid) : "",
                                analyzer::diagnosis_kind_name(focus.diagnosis.kind),
                                analyzer::diagnosis_text(focus.model, focus.diagnosis, *focus.stacks)));
    if (auto origin = top_leak_origin(focus))
        lines.push_back(*origin);
    // Host memory beside the GPU verdict: the workers' growth is often what kills the run.
    constexpr size_t kMostHostLines = 4;
    size_t host_lines = 0;
    size_t host_more = 0;
    for (const ProcessReport& process : processes) {
        if (!process.diagnosis.host_ram ||
            (&process == &focus_listed && focus.diagnosis.kind == DiagnosisKind::HostRamGrowth))
            continue;
        if (host_lines == kMostHostLines) {
            ++host_more;
            continue;
        }
        ++host_lines;
        const std::string role = analyzer::role_text(process.model.role);
        lines.push_back(fmt::format("host memory of pid {}{}: {}", process.model.header.pid,
                                    role.empty() ? std::string() : " (" + role + ")",
                                    analyzer::host_growth_brief(*process.diagnosis.host_ram)));
    }
    if (host_more > 0)
        lines.push_back(
            fmt::format("host memory of {} more grew too: see the report", plural(host_more, "process")));
    if (!report.files.empty()) {
        std::vector<std::string> beside;
        for (auto file = report.files.begin() + 1; file != report.files.end(); ++file)
            beside.push_back(file->substr(file->rfind('/') + 1));
        lines.push_back(beside.empty() ? fmt::format("full report: {}", report.files.front())
                                       : fmt::format("full report: {} (and {} beside it)",
                                                     report.files.front(), fmt::join(beside, ", ")));
    }
    return lines;
}

} // namespace

std::vector<std::string> report_lines(const CommandEnd& end, RunReport& report) {
    // A report of many processes reads the traces again (ReportSet::whole): one may be gone by now, and
    // the launcher still ends with the command's status.
    try {
        return summary_lines(end, report);
    } catch (const std::exception& failure) {
        const std::string& written = report.files.empty() ? std::string("no file") : report.files.front();
        return {fmt::format("no summary: {}; the report: {}", failure.what(), written)};
    }
}

} // namespace gpuleak::launcher
