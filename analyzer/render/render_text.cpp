#include "render_text.h"

#include <algorithm>
#include <csignal>
#include <cstring>
#include <filesystem>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "diagnosis_text.h"
#include "printable.h"
#include "stack_view.h"

namespace gpuleak::analyzer {

namespace {

constexpr size_t kWrapColumn = 100;
// A site's holders shown beside it; JSON has them all.
constexpr size_t kHoldersShown = 3;

class Style {
  public:
    explicit Style(bool color) : color_(color) {}
    [[nodiscard]] std::string bold(const std::string& text) const { return wrap("1", text); }
    [[nodiscard]] std::string dim(const std::string& text) const { return wrap("2", text); }
    [[nodiscard]] std::string verdict(DiagnosisKind kind, const std::string& text) const {
        switch (kind) {
        case DiagnosisKind::Leak:
            return wrap("1;31", text);
        case DiagnosisKind::Stable:
            return wrap("1;32", text);
        default:
            return wrap("1;33", text);
        }
    }

  private:
    [[nodiscard]] std::string wrap(const char* code, const std::string& text) const {
        return color_ ? fmt::format("\033[{}m{}\033[0m", code, text) : text;
    }
    bool color_;
};

std::string wrapped(const std::string& text, const std::string& indent) {
    std::string out;
    std::string line = indent;
    size_t start = 0;
    while (start < text.size()) {
        size_t end = text.find(' ', start);
        if (end == std::string::npos)
            end = text.size();
        const std::string word = text.substr(start, end - start);
        // "4 %" reads as one word.
        const bool glued = word.starts_with('%');
        if (!glued && line.size() > indent.size() && line.size() + 1 + word.size() > kWrapColumn) {
            out += line + "\n";
            line = indent;
        }
        if (line.size() > indent.size())
            line += " ";
        line += word;
        start = end + 1;
    }
    return out + line + "\n";
}

std::string bytes(uint64_t value) {
    return human_bytes(static_cast<double>(value));
}

std::string ended(const ProcessModel& model) {
    const double seconds = seconds_of(model.duration_ns);
    const ProcessEnd& end = model.header.end;
    switch (end.state) {
    case format::EndState::Exited:
        return fmt::format("exited with status {} after {:.1f} s", end.exit_code, seconds);
    case format::EndState::Signaled: {
        const char* name = sigabbrev_np(end.signal);
        return fmt::format("killed by signal {} (SIG{}) after {:.1f} s", end.signal,
                           name != nullptr ? name : "?", seconds);
    }
    case format::EndState::Exec:
        return fmt::format(
            "replaced its image with exec after {:.1f} s (the new image has a trace of its own)", seconds);
    case format::EndState::Running:
        break;
    }
    if (end.running_when_opened == true)
        return fmt::format("still running when this report was made, {:.1f} s after it started", seconds);
    return fmt::format("killed: no exit record (SIGKILL, e.g. by the OOM killer{}) after {:.1f} s",
                       end.running_when_opened ? "" : ", or still running", seconds);
}

std::string command(const ProcessModel& model) {
    std::string text;
    for (const std::string& argument : model.header.command_line)
        text += (text.empty() ? "" : " ") + printable(argument);
    return text.empty() ? "?" : text;
}

std::string frame_line(const StackLine& line, const ReportOptions& options) {
    const ReportFrame& frame = *line.frame;
    std::string more;
    if (line.same_library > 0)
        more = fmt::format("  (+{} more in {})", line.same_library, line.library);
    if (frame.python)
        return python_frame_name(frame) + more;
    const std::string module = std::filesystem::path(frame.module).filename().string();
    if (frame.function.empty() && frame.file.empty())
        return fmt::format("{}+{:#x}{}", module, frame.module_offset, more);
    if (line.same_library > 0 && !options.full_names)
        // A library's internals: its innermost function, by the last two parts of its name, tells one
        // path through it from another.
        return fmt::format("{}  ({} frames in {})", innermost_scopes(short_function_name(frame.function), 2),
                           line.same_library + 1, line.library);
    const std::string where =
        frame.file.empty()
            ? module
            : fmt::format("{}:{}", std::filesystem::path(frame.file).filename().string(), frame.line);
    const std::string function = frame.function.empty() ? "?"
                                 : options.full_names   ? frame.function
                                                        : short_function_name(frame.function);
    return fmt::format("{}  {}{}{}", function, where, frame.inlined ? " (inlined)" : "", more);
}

// A stack line, and whether it stands for frames left out (shown dim).
std::pair<std::string, bool> line_text(const StackLine& line, const ReportOptions& options) {
    switch (line.kind) {
    case StackLine::Kind::Frame:
        return {printable(frame_line(line, options)), false};
    case StackLine::Kind::NativeLeftOut:
        return {fmt::format("... {} native frame{}", line.count, line.count == 1 ? "" : "s"), true};
    case StackLine::Kind::MoreLeftOut:
        return {fmt::format("... {} more frames", line.count), true};
    case StackLine::Kind::MorePythonLeftOut:
        return {fmt::format("... {} more Python frames", line.count), true};
    }
    return {};
}

void append_frame_lines(std::string& out, StackFrames& stacks, uint32_t stack_id,
                        const ReportOptions& options, const Style& style) {
    const auto& frames = stacks.frames(stack_id);
    if (frames.empty()) {
        out += style.dim("        (no stack)") + "\n";
        return;
    }
    for (const StackLine& line : stack_lines(frames, options)) {
        const auto [text, left_out] = line_text(line, options);
        out += (left_out ? style.dim("        " + text) : "        " + text) + "\n";
    }
}

void append_frames(std::string& out, StackFrames& stacks, uint32_t stack_id, const ReportOptions& options,
                   const Style& style) {
    append_frame_lines(out, stacks, stack_id, options, style);
    // The stack that started the thread: a library's thread has the program's line only there.
    if (const uint32_t start = stacks.thread_start_of(stack_id); start != 0) {
        out += style.dim("        on a thread started at") + "\n";
        append_frame_lines(out, stacks, start, options, style);
    }
}

std::string when_made(const ProcessModel& model, const LeakSite& site) {
    if (site.count == 1) {
        std::string during =
            site.marker_range
                ? fmt::format(" (during {})", marker_interval_name(model, site.marker_range->first))
                : "";
        return fmt::format("made at {:.2f} s{}", seconds_of(site.first_ns), during);
    }
    const std::string during =
        site.marker_range && site.marker_range->first != site.marker_range->second
            ? fmt::format("made during {} to {}", marker_interval_name(model, site.marker_range->first),
                          marker_interval_name(model, site.marker_range->second))
            : fmt::format("made {:.2f} s to {:.2f} s", seconds_of(site.first_ns), seconds_of(site.last_ns));
    const std::string share = fmt::format("{:.0f}% of the work", 100 * site.program_share);
    if (!site.growing)
        return site.program_share < 0.005 ? during + ", at once, then kept"
                                          : fmt::format("{}, within {}, then kept", during, share);
    return fmt::format("{}, through {}: growing", during, share);
}

// "train.py:31 in train_step, train.py:23 in batch": the sites a holder held, three at most.
std::string sites_of(const RetainerSnapshot& snapshot, const std::vector<SiteShare>& shares,
                     StackFrames& stacks) {
    std::vector<std::string> where;
    for (const SiteShare& share : shares) {
        std::string described = printable(stacks.describe(snapshot.sites[share.site].stack_id));
        if (std::find(where.begin(), where.end(), described) == where.end())
            where.push_back(std::move(described));
    }
    const size_t more = where.size() > 3 ? where.size() - 3 : 0;
    where.resize(where.size() - more);
    return fmt::format("{}", fmt::join(where, ", ")) +
           (more > 0 ? fmt::format(" and {} more sites", more) : "");
}

// One chain of a holder, and what to change, under its line.
void append_chain(std::string& out, const Retainer& holder, const std::string& path,
                  const std::string& indent) {
    if (!path.empty())
        out += indent + "through " + printable(path) + "\n"; // one expression: never broken, however long
    for (const std::string& advice : holder.advice)
        out += wrapped(printable(advice), indent);
}

// A record of what held the memory, whole: each holder with the sites it held, then what nothing reached.
void append_retainers(std::string& out, const RetainerSnapshot& snapshot, StackFrames& stacks,
                      const std::string& indent) {
    if (!snapshot.problem.empty()) {
        out += wrapped("gpuleak.why() found no answer: " + printable(snapshot.problem), indent);
        return;
    }
    for (const Retainer& holder : snapshot.holders) {
        out += wrapped(fmt::format("{} made at {}: held by {}", bytes(holder.bytes),
                                   sites_of(snapshot, holder.sites, stacks), retainer_name(holder)),
                       indent);
        append_chain(out, holder, holder.path, indent + "  ");
    }
    for (const SiteShare& share : snapshot.unreached) {
        const std::string where = sites_of(snapshot, {share}, stacks);
        // The report's words for the site end with what a library keeps it for.
        if (!snapshot.stopped && !library_purpose(stacks.frames(snapshot.sites[share.site].stack_id)).empty())
            out += wrapped(fmt::format("{} made at {}: not the program's to free", bytes(share.bytes), where),
                           indent);
        else
            out += wrapped(fmt::format("{} made at {}: not reached from the program's objects{}",
                                       bytes(share.bytes), where,
                                       snapshot.stopped
                                           ? fmt::format(" (the search stopped after {:.1f} s and {} "
                                                         "objects)",
                                                         snapshot.seconds, snapshot.objects)
                                           : std::string()),
                           indent);
    }
}

void append_site(std::string& out, ProcessReport& report, const LeakSite& site, size_t number,
                 const ReportOptions& options, const Style& style) {
    out += fmt::format("  #{} {} in {}, {}\n", number, bytes(site.bytes),
                       allocations_of(site.kind, site.count), when_made(report.model, site));
    // What a library keeps it for, where its frames say so: not the program's to free.
    if (const std::string purpose = site_purpose(site, *report.stacks); !purpose.empty())
        out += style.dim(fmt::format("        ({})", purpose)) + "\n";
    if (site.freed_at_exit > 0)
        out +=
            style.dim(site.freed_at_exit == site.bytes
                          ? std::string("        (freed only as the process exited, after the program's code "
                                        "ended)")
                          : fmt::format("        ({} of it freed only as the process exited, after the "
                                        "program's code ended)",
                                        bytes(site.freed_at_exit))) +
            "\n";
    if (site.spilled > 0)
        out += style.dim(fmt::format("        ({} of them counted by site only: when each was made is known "
                                     "to a stretch of the run)",
                                     site.spilled)) +
               "\n";
    if (!site.held_by.empty()) {
        // One record names them all; the largest holder's chain and advice are shown, the rest are named.
        const RetainerSnapshot& snapshot = report.model.retainers[site.held_by.front().snapshot];
        std::vector<std::string> holders;
        for (size_t i = 0; i < site.held_by.size() && i < kHoldersShown; ++i)
            holders.push_back(fmt::format("{} {} {}", bytes(site.held_by[i].bytes), i == 0 ? "held by" : "by",
                                          retainer_name(snapshot.holders[site.held_by[i].holder])));
        if (site.held_by.size() > kHoldersShown)
            holders.push_back(fmt::format("and {} more holders", site.held_by.size() - kHoldersShown));
        out += wrapped(fmt::format("{}: {}", retainers_when(snapshot), fmt::join(holders, "; ")), "        ");
        const HeldBy& largest = site.held_by.front();
        const Retainer& holder = snapshot.holders[largest.holder];
        append_chain(out, holder, holder.sites[largest.share].path, "          ");
    }
    append_frames(out, *report.stacks, site.stack_id, options, style);
}

std::string failure_cause(const FailureSummary& failure) {
    if (!failure.allocator_refused) {
        const std::string meaning = cuda_error_meaning(failure.error);
        return fmt::format("error {}{}", failure.error,
                           meaning.empty() ? std::string() : " (" + meaning + ")");
    }
    if (failure.failed_cuda_allocations == 0)
        return "out of memory (allocator refused; no CUDA allocation failed)";
    const std::string error =
        failure.error == format::kAllocatorRefused ? "" : fmt::format(", error {}", failure.error);
    return fmt::format("out of memory (allocator gave up after {} failed CUDA allocation{}{})",
                       failure.failed_cuda_allocations, failure.failed_cuda_allocations == 1 ? "" : "s",
                       error);
}

// The samples a text timeline shows: about `rows`, evenly spaced in time from the first to the last,
// and the one of peak RSS, so that the table holds the peak the summary names.
std::vector<const HostPoint*> timeline_rows(const std::vector<HostPoint>& points, size_t rows) {
    std::vector<const HostPoint*> shown;
    if (points.empty() || rows < 2)
        return shown;
    const auto peak = std::max_element(points.begin(), points.end(),
                                       [](const HostPoint& a, const HostPoint& b) { return a.rss < b.rss; });
    const uint64_t first = points.front().time_ns;
    const uint64_t span = points.back().time_ns - first;
    auto next = points.begin();
    for (size_t row = 0; row < rows; ++row) {
        const uint64_t mark = first + span / (rows - 1) * row + (row == rows - 1 ? span % (rows - 1) : 0);
        // The last sample at or before the mark.
        while (std::next(next) != points.end() && std::next(next)->time_ns <= mark)
            ++next;
        if ((shown.empty() || shown.back() < &*peak) && &*peak < &*next)
            shown.push_back(&*peak);
        if (shown.empty() || shown.back() != &*next)
            shown.push_back(&*next);
    }
    return shown;
}

void append_host_timeline(std::string& out, const std::vector<HostPoint>& points) {
    constexpr size_t kRows = 8;
    if (points.size() < 3)
        return;
    constexpr const char* kRow = "  {:<9}{:>9} {}\n";
    out += fmt::format(kRow, "over time", "t",
                       fmt::format("{:>10} {:>10} {:>10} {:>10} {:>10} {:>10}", "RSS", "USS", "PSS",
                                   "allocated", "shared", "swap"));
    std::string previous;
    for (const HostPoint* point : timeline_rows(points, kRows)) {
        const bool proportional = point->has(format::HostField::Proportional);
        const bool status = point->has(format::HostField::Status);
        const auto shown = [](bool read, uint64_t value) { return read ? bytes(value) : std::string("-"); };
        std::string figures =
            fmt::format("{:>10} {:>10} {:>10} {:>10} {:>10} {:>10}", bytes(point->rss),
                        shown(proportional, point->sample.uss), shown(proportional, point->sample.pss),
                        shown(status, point->allocated()), shown(status, point->sample.rss_shmem),
                        shown(status, point->sample.swap));
        // A stretch where nothing changed shows once, at its start; the last sample always shows.
        if (figures == previous && point != &points.back())
            continue;
        out +=
            fmt::format(fmt::runtime(kRow), "", fmt::format("{:.1f} s", seconds_of(point->time_ns)), figures);
        previous = std::move(figures);
    }
    out += "             (allocated: anonymous memory, resident and swapped, less what malloc keeps free)\n";
}

void append_process(std::string& out, ProcessReport& report, const ReportOptions& options,
                    const Style& style) {
    const ProcessModel& model = report.model;
    const std::string role = role_text(model.role);
    out += style.bold(fmt::format("process {} (parent {}){}: {}", model.header.pid, model.header.ppid,
                                  role.empty() ? std::string() : ", " + role, command(model))) +
           "\n";
    if (!report.started_at.empty())
        out += fmt::format("  started    by pid {} at {}\n", model.header.ppid, printable(report.started_at));
    if (report.target)
        out += fmt::format("  runs       {}\n", printable(python_frame_name(*report.target)));
    if (model.header.host_only())
        out += "  gpu        none: the process never used CUDA; its host memory was sampled\n";
    out +=
        fmt::format("  trace      {}{}\n", printable(model.path),
                    model.header.simulated_device() ? "  (simulated CUDA device: no real GPU was used)" : "");
    out += fmt::format("  ended      {}\n", ended(model));
    if (model.error) {
        // Under the header's values, with its label on the first line.
        std::string error = wrapped(program_error_text(model, *model.error), std::string(13, ' '));
        out += error.replace(0, 13, "  error      ");
    }
    if (model.code_end_ns)
        out += fmt::format(
            "  python     finalization began at {:.1f} s: growth is judged on the events before it\n",
            seconds_of(*model.code_end_ns));
    for (const DeviceSummary& device : model.devices) {
        out +=
            fmt::format("  device {}   reserved peak {}, final {}; allocated peak {}, final {}{}\n",
                        device.device, bytes(device.peak_reserved), bytes(device.final_reserved),
                        bytes(device.peak_allocated), bytes(device.final_allocated),
                        model.reports_blocks ? "" : " (no allocator reported blocks: allocated = reserved)");
        if (device.capacity)
            out += fmt::format(
                "             capacity {}, lowest free seen {} ({} in use per the driver then)\n",
                bytes(*device.capacity), bytes(*device.lowest_free), bytes(*device.peak_used_by_driver));
    }
    if (model.peak_pinned_host > 0)
        out += fmt::format("  pinned     host memory peak {}, final {}\n", bytes(model.peak_pinned_host),
                           bytes(model.final_pinned_host));
    if (model.peak_managed > 0)
        out += fmt::format("  managed    peak {}\n", bytes(model.peak_managed));
    if (const HostPoint* first = model.host.first()) {
        out += fmt::format("  host       at the start {}\n", host_point_text(*first));
        const HostPoint* end = code_end_host_point(model);
        if (end != first)
            out +=
                fmt::format("             {} {}\n", end == model.host.last() ? "at the end  " : "before exit",
                            host_point_text(*end));
        std::string peaks = fmt::format("peak RSS {}", bytes(model.host.peak_rss));
        if (model.host.peak_uss)
            peaks += fmt::format(", USS {}, PSS {}", bytes(*model.host.peak_uss),
                                 bytes(model.host.peak_pss.value_or(0)));
        out += fmt::format("             {}\n", peaks);
        if (model.host.cgroup_limit && model.host.peak_cgroup)
            out += fmt::format("  cgroup     memory peak {} of its limit {}\n",
                               bytes(*model.host.peak_cgroup), bytes(*model.host.cgroup_limit));
        append_host_timeline(out, model.host.points);
    }
    if (!model.header.host_only())
        out += fmt::format("  events     {} ({} overwritten in the ring); failed allocations {}\n",
                           model.events, model.events_overwritten, model.failed_allocations);
    for (const std::string& note : exactness_notes(model))
        out += style.bold("  not exact  ") + wrapped(note, "             ").substr(13);
    out += "\n";

    out += style.bold("Diagnosis: ") +
           style.verdict(report.diagnosis.kind, diagnosis_kind_name(report.diagnosis.kind)) + "\n";
    out += wrapped(diagnosis_text(model, report.diagnosis, *report.stacks), "  ") + "\n";
    if (report.diagnosis.pressure)
        out += style.bold("Memory limit: ") + "\n" +
               wrapped(pressure_text(*report.diagnosis.pressure), "  ") + "\n";
    if (report.diagnosis.killed)
        out += style.bold("Killed: ") + "\n" + wrapped(killed_text(model, *report.diagnosis.killed), "  ") +
               "\n";
    if (report.diagnosis.host_ram && report.diagnosis.kind != DiagnosisKind::HostRamGrowth)
        out += style.bold("Host memory: ") +
               style.verdict(DiagnosisKind::HostRamGrowth,
                             host_growth_cause_name(report.diagnosis.host_ram->cause)) +
               "\n" + wrapped(host_growth_text(model, *report.diagnosis.host_ram), "  ") + "\n";

    // What grew first: the leak is the first screen's, however small against what was made once.
    for (size_t i = 0; i < model.growth_sites.size() && i < options.top; ++i) {
        if (i == 0)
            out +=
                style.bold("Growing: held by the program and made through its work (largest first):") + "\n";
        append_site(out, report, model.leak_sites[model.growth_sites[i]], i + 1, options, style);
    }
    if (!model.growth_sites.empty())
        out += "\n";

    size_t shown = 0;
    for (const LeakSite& site : model.leak_sites) {
        if (shown >= options.top || site.bytes < options.min_bytes)
            break;
        if (site.segments ||
            std::find(model.growth_sites.begin(), model.growth_sites.end(),
                      static_cast<size_t>(&site - model.leak_sites.data())) != model.growth_sites.end())
            continue;
        if (shown == 0)
            out += style.bold(fmt::format(fmt::runtime(model.growth_sites.empty()
                                                           ? "Live {}, by call stack (largest first):"
                                                           : "Also live {} (largest first):"),
                                          model.code_end_ns ? "as the program's code ended" : "at the end")) +
                   "\n";
        ++shown;
        append_site(out, report, site, shown, options, style);
    }
    if (shown == 0 && model.growth_sites.empty() && !model.header.host_only())
        out += fmt::format("Nothing was live {}.\n",
                           model.code_end_ns ? "as the program's code ended" : "at the end");
    if (!model.header.host_only())
        out += "\n";

    // A sub-allocator's segments hold the blocks above and its cache: one line each, after them.
    size_t segments = 0;
    for (const LeakSite& site : model.leak_sites) {
        if (!site.segments || segments >= options.top || site.bytes < options.min_bytes)
            continue;
        if (segments == 0)
            out += style.bold("Reserved by the caching allocator at the end (segments holding the blocks "
                              "above and its cache):") +
                   "\n";
        ++segments;
        out += fmt::format("  {} in {} {} segment{}, for {}\n", bytes(site.bytes), site.count,
                           format::kind_name(site.kind), site.count == 1 ? "" : "s",
                           printable(report.stacks->describe(site.stack_id)));
    }
    if (segments > 0)
        out += "\n";

    for (size_t i = 0; i < model.failures.size() && i < options.top; ++i) {
        const FailureSummary& failure = model.failures[i];
        if (i == 0)
            out += style.bold("Failed allocations:") + "\n";
        std::string then = failure.reserved_then ? fmt::format("; {} reserved on the device then",
                                                               bytes(*failure.reserved_then))
                                                 : "; what was live then is older than the event ring";
        std::string free_then =
            failure.free_bytes ? fmt::format(", {} free", bytes(*failure.free_bytes)) : "";
        out += fmt::format("  #{} {} of {} memory on device {} at {:.2f} s, {}{}{}\n", i + 1,
                           bytes(failure.bytes), format::kind_name(failure.kind), failure.device,
                           seconds_of(failure.time_ns), failure_cause(failure), free_then, then);
        append_frames(out, *report.stacks, failure.stack_id, options, style);
        for (const LiveSiteAt& site : failure.top_sites_then) {
            out +=
                fmt::format("      held then: {} in {} allocation{} from {}\n", bytes(site.bytes), site.count,
                            site.count == 1 ? "" : "s", printable(report.stacks->describe(site.stack_id)));
        }
        if (failure.retainers) {
            const RetainerSnapshot& snapshot = model.retainers[*failure.retainers];
            out += fmt::format("      what held it, as gpuleak.why() found it before the error reached the "
                               "program ({:.1f} s):\n",
                               snapshot.seconds);
            if (!snapshot.saved_tensors_read)
                out +=
                    wrapped("(the tensors autograd saved were not looked into: the program set saved-tensor "
                            "hooks, which reading them would have run)",
                            "        ");
            append_retainers(out, snapshot, *report.stacks, "        ");
        }
    }
    for (const std::string& warning : model.warnings)
        out += style.dim("  warning: " + printable(warning)) + "\n";
    out += "\n";
}

void append_process_table(std::string& out, std::vector<ProcessReport>& reports, const Style& style) {
    out += style.bold(fmt::format("{} processes:", reports.size())) + "\n";
    // The row's format: what the program's own code held last, before its teardown, next to each peak.
    constexpr const char* kRow = "  {:>8} {:>8}  {:<14} {:>12} {:>12} {:>21} {:>21}  {:<18} {:<14} {}\n";
    out += fmt::format(kRow, "pid", "parent", "ended", "peak reserved", "final alloc.", "RSS peak, final",
                       "USS peak, final", "diagnosis", "host memory", "process");
    for (ProcessReport& report : reports) {
        const ProcessModel& model = report.model;
        uint64_t peak = 0;
        uint64_t final_allocated = 0;
        for (const DeviceSummary& device : model.devices) {
            peak += device.peak_reserved;
            final_allocated += device.final_allocated;
        }
        const char* how = model.header.end.state == format::EndState::Exited     ? "exit"
                          : model.header.end.state == format::EndState::Signaled ? "signal"
                          : model.header.end.state == format::EndState::Exec     ? "exec"
                          : model.header.end.running_when_opened == true         ? "running"
                                                                                 : "killed";
        std::string end = model.header.end.state == format::EndState::Exited
                              ? fmt::format("{} {}", how, model.header.end.exit_code)
                          : model.header.end.state == format::EndState::Signaled
                              ? fmt::format("{} {}", how, model.header.end.signal)
                              : std::string(how);
        std::string who = role_text(model.role);
        if (who.empty())
            who = command(model);
        // A function of the program's own says more than the role; a library's (a Pool's worker loop) does
        // not.
        if (report.target && is_program_frame(*report.target))
            who += " running " + printable(report.target->function);
        const HostPoint* last = code_end_host_point(model);
        const std::string rss = last == nullptr
                                    ? std::string("-")
                                    : fmt::format("{}, {}", bytes(model.host.peak_rss), bytes(last->rss));
        const std::string uss =
            last == nullptr || !model.host.peak_uss
                ? std::string("-")
                : fmt::format("{}, {}", bytes(*model.host.peak_uss), bytes(last->sample.uss));
        out += fmt::format(
            fmt::runtime(kRow), model.header.pid, model.header.ppid, end,
            model.header.host_only() ? std::string("-") : bytes(peak),
            model.header.host_only() ? std::string("-") : bytes(final_allocated), rss, uss,
            diagnosis_kind_name(report.diagnosis.kind),
            report.diagnosis.host_ram ? host_growth_cause_name(report.diagnosis.host_ram->cause) : "-", who);
    }
    if (const std::optional<RunMemoryFacts>& peak = reports.front().diagnosis.run_memory) {
        const std::string role = role_text(peak->largest_role);
        out += wrapped(
            fmt::format("Run memory at its fullest, {:.1f} s into the run: {}. The process with the most "
                        "resident memory then was pid {}{}, with {}.",
                        seconds_of(peak->run_time_ns), run_memory_held(*peak), peak->largest_pid,
                        role.empty() ? std::string() : ", " + role, bytes(peak->largest_rss)),
            "");
    }
    out += "\n";
}

// "the end of pid 4242 (python train.py)", "\"epoch 2\" at 12.3 s in pid 4242 (python train.py)".
std::string state_name(const MemoryState& state) {
    const ProcessModel& model = state.report->model;
    const std::string process = fmt::format("pid {} ({})", model.header.pid, command(model));
    if (!state.marker_ns)
        return fmt::format("the end of {}, {}", process, printable(model.path));
    return fmt::format("\"{}\" at {:.1f} s in {}", printable(state.label), seconds_of(*state.marker_ns),
                       process);
}

// "+1.2 GiB", "-20.0 MiB".
std::string signed_bytes(int64_t change) {
    return (change < 0 ? "-" : "+") + bytes(static_cast<uint64_t>(change < 0 ? -change : change));
}

// "0, now 1.2 GiB in 300 blocks", "20.0 MiB in 2 device allocations, now 0".
std::string then_and_now(const SiteChange& change) {
    const auto held = [&](const std::optional<LiveSiteAt>& site) {
        return site && site->count > 0
                   ? fmt::format("{} in {}", bytes(site->bytes), allocations_of(change.kind, site->count))
                   : std::string("nothing");
    };
    return fmt::format("{} then, {} now", held(change.before), held(change.after));
}

} // namespace

std::vector<std::string> stack_text(StackFrames& stacks, uint32_t stack_id, const ReportOptions& options) {
    std::vector<std::string> lines;
    const auto add = [&](uint32_t id) {
        const auto& frames = stacks.frames(id);
        if (frames.empty())
            lines.emplace_back("(no stack)");
        for (const StackLine& line : stack_lines(frames, options))
            lines.push_back(line_text(line, options).first);
    };
    add(stack_id);
    if (const uint32_t start = stacks.thread_start_of(stack_id); start != 0) {
        lines.emplace_back("on a thread started at");
        add(start);
    }
    return lines;
}

std::string render_changes_text(Comparison& comparison, const ReportOptions& options) {
    const Style style(options.color);
    std::string out = style.bold(fmt::format("What changed from {}\n  to {}", state_name(comparison.before),
                                             state_name(comparison.after))) +
                      "\n";
    const int64_t change =
        static_cast<int64_t>(comparison.after_bytes) - static_cast<int64_t>(comparison.before_bytes);
    const auto grown = static_cast<size_t>(std::count_if(comparison.changes.begin(), comparison.changes.end(),
                                                         [](const SiteChange& c) { return c.change() > 0; }));
    out += wrapped(fmt::format("The program held {}, then {} ({}). {} site{} grew and {} shrank{}.",
                               bytes(comparison.before_bytes), bytes(comparison.after_bytes),
                               signed_bytes(change), grown, grown == 1 ? "" : "s",
                               comparison.changes.size() - grown,
                               comparison.changes.empty() ? "" : "; the largest changes first"),
                   "");
    const std::vector<const SiteChange*> shown = shown_changes(comparison, options);
    size_t number = 0;
    for (const SiteChange* listed : shown) {
        const SiteChange& site = *listed;
        ++number;
        out += fmt::format("\n  #{} {}: {}\n", number, signed_bytes(site.change()), then_and_now(site));
        // The later state's stack where it has the site, else the earlier one's.
        StackFrames& stacks = *(site.after ? comparison.after : comparison.before).report->stacks;
        const uint32_t stack_id = site.after ? site.after->stack_id : site.before->stack_id;
        if (const std::string purpose = library_purpose(stacks.frames(stack_id)); !purpose.empty())
            out += style.dim(fmt::format("        ({})", purpose)) + "\n";
        append_frames(out, stacks, stack_id, options, style);
    }
    if (shown.size() < comparison.changes.size())
        out += style.dim(fmt::format("\n  ... {} more, smaller (--top and --min-bytes choose)",
                                     comparison.changes.size() - shown.size())) +
               "\n";
    return out;
}

std::string render_text(std::vector<ProcessReport>& reports, const ReportOptions& options) {
    const Style style(options.color);
    std::string out;
    if (reports.size() > 1)
        append_process_table(out, reports, style);
    for (ProcessReport& report : reports)
        append_process(out, report, options, style);
    return out;
}

} // namespace gpuleak::analyzer
