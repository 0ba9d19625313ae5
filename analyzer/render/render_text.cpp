#include "render/render_text.h"

#include <algorithm>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <limits>
#include <map>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "common/printable.h"
#include "render/byte_sizes.h"
#include "render/cuda_errors.h"
#include "render/diagnosis_text.h"
#include "render/text_style.h"
#include "render/wrapped_text.h"
#include "report/job_facts.h"
#include "report/shared_devices.h"
#include "report/stack_view.h"

namespace gpuleak::analyzer {

namespace {

// A site's holders shown beside it; JSON has them all.
constexpr size_t kHoldersShown = 3;

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

// The program's line in `most` columns: its text cut ("…") where the whole does not fit.
std::string program_line_text(const ReportFrame& frame, size_t most) {
    const auto [where, text] = program_line(frame);
    if (text.empty())
        return printable(where);
    const std::string line = printable(where) + "  ";
    return line + cut_to_columns(printable(text), most > columns(line) + 1 ? most - columns(line) : 1);
}

// "→ torch cross_entropy → nll_loss_forward": what a view's line called.
std::string calls_text(const ProgramView& view) {
    std::string calls;
    for (const std::string& call : view.calls)
        calls += (calls.empty() ? "→ " : " → ") + printable(call);
    return calls;
}

// "→ torch cross_entropy → nll_loss_forward", "from train.py:88 in train_epoch ← lightning ← train.py:120
// in <module>": what the program's line called, and who called it.
void append_program_view(std::string& out, const ProgramView& view, const Style& style) {
    // A line's continuation is indented under it.
    if (!view.calls.empty())
        out += style.dim(wrapped(calls_text(view), "          ", "        "));
    if (view.callers.empty())
        return;
    std::string callers = "from";
    const char* separator = " ";
    for (const ProgramView::Caller& caller : view.callers) {
        callers += separator +
                   printable(caller.frame != nullptr ? python_frame_name(*caller.frame) : caller.package);
        separator = " ← ";
    }
    if (view.callers_left_out > 0)
        callers += fmt::format(" ← {} more", view.callers_left_out);
    out += style.dim(wrapped(callers, "          ", "        "));
}

// The program's own line of a stack, or of the stack that started the thread it was made on; null where
// neither has one, and with --native, which shows every frame as it is.
const ReportFrame* program_frame_of(StackFrames& stacks, uint32_t stack_id, const ReportOptions& options) {
    if (options.native)
        return nullptr;
    for (const uint32_t id : {stack_id, stacks.thread_start_of(stack_id)}) {
        if (id == 0)
            continue;
        const auto& frames = stacks.frames(id);
        if (const auto own = std::find_if(frames.begin(), frames.end(), is_program_frame);
            own != frames.end())
            return &*own;
    }
    return nullptr;
}

// A stack as the text shows it by default (program_view); none with --native, which shows every frame.
ProgramView text_view(StackFrames& stacks, uint32_t stack_id, const ReportOptions& options) {
    return options.native || stack_id == 0 ? ProgramView{} : program_view(stacks.frames(stack_id));
}

// A stack under a line that names `own` (program_frame_of) where it has one: what the program's line
// called and who called it, as its author reads it (`view`, text_view's of the stack). A Python program's
// stack without a line of its own under its header (StackFrames::describe): the calls it went through,
// where it went through any (--native shows its frames). Else every frame the options show. `own` null:
// the stack's own first line is its program line.
void append_frames(std::string& out, StackFrames& stacks, uint32_t stack_id, const ProgramView& view,
                   const ReportOptions& options, const Style& style, bool python_program,
                   const ReportFrame* own = nullptr) {
    const uint32_t start = stacks.thread_start_of(stack_id);
    const ProgramView started = text_view(stacks, start, options);
    // The header names the line that started the thread: what the thread went through and what the
    // line called to start it are all there is to add.
    const bool started_there = started.own != nullptr && own == started.own && started.callers.empty();
    const std::string started_how = started.calls.empty() ? std::string() : " (" + calls_text(started) + ")";
    if (view.own != nullptr) {
        if (own == nullptr)
            out += "        " + program_line_text(*view.own, kWrapColumn - 8) + "\n";
        append_program_view(out, view, style);
    } else if (python_program && !view.calls.empty()) {
        if (started_there) {
            out += style.dim(wrapped(calls_text(view) + ", on a thread started there" + started_how,
                                     "          ", "        "));
            return;
        }
        append_program_view(out, view, style);
    } else {
        append_frame_lines(out, stacks, stack_id, options, style);
    }
    // The stack that started the thread: a library's thread has the program's line only there.
    if (start == 0)
        return;
    if (started.own == nullptr) {
        out += style.dim("        on a thread started at") + "\n";
        append_frame_lines(out, stacks, start, options, style);
        return;
    }
    if (started_there) {
        out += style.dim(wrapped("on a thread started there" + started_how, "          ", "        "));
        return;
    }
    const std::string started_at = "        on a thread started at ";
    out += style.dim(own == started.own
                         ? std::string("        on a thread started there")
                         : started_at + program_line_text(*started.own, kWrapColumn - columns(started_at))) +
           "\n";
    append_program_view(out, started, style);
}

std::string when_made(const ProcessModel& model, const LeakSite& site) {
    if (site.count == 1) {
        std::string during =
            site.marker_range
                ? fmt::format(" (during {})", marker_interval_name(model, site.marker_range->first))
                : "";
        return fmt::format("made at {:.2f} s{}", seconds_of(site.first_ns), during);
    }
    const std::string first = fmt::format("{:.2f}", seconds_of(site.first_ns));
    const std::string last = fmt::format("{:.2f}", seconds_of(site.last_ns));
    const std::string during =
        site.marker_range && site.marker_range->first != site.marker_range->second
            ? fmt::format("made during {} to {}", marker_interval_name(model, site.marker_range->first),
                          marker_interval_name(model, site.marker_range->second))
        : first == last ? fmt::format("made at {} s", first)
                        : fmt::format("made {}–{} s", first, last);
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

// One chain of a holder, and what to change, under its line: advice in `advice_shown` was given above,
// and is not repeated.
void append_chain(std::string& out, const Retainer& holder, const std::string& path,
                  const std::string& indent, std::set<std::string>& advice_shown) {
    if (!path.empty())
        out += indent + "through " + printable(path) + "\n"; // one expression: never broken, however long
    for (const std::string& advice : holder.advice)
        if (advice_shown.insert(advice).second)
            out += wrapped(printable(advice), indent);
}

// A record of what held the memory, whole: each holder with the sites it held, then what nothing reached.
void append_retainers(std::string& out, const RetainerSnapshot& snapshot, StackFrames& stacks,
                      const std::string& indent) {
    std::set<std::string> advice_shown;
    if (!snapshot.problem.empty()) {
        out += wrapped("gpuleak.why() found no answer: " + printable(snapshot.problem), indent);
        return;
    }
    for (const Retainer& holder : snapshot.holders) {
        out += wrapped(fmt::format("{} made at {}: held by {}", human_bytes(holder.bytes),
                                   sites_of(snapshot, holder.sites, stacks), retainer_name(holder)),
                       indent);
        append_chain(out, holder, holder.path, indent + "  ", advice_shown);
    }
    for (const SiteShare& share : snapshot.unreached) {
        const std::string where = sites_of(snapshot, {share}, stacks);
        // The report's words for the site end with what a library keeps it for.
        if (!snapshot.stopped && !library_purpose(stacks.frames(snapshot.sites[share.site].stack_id)).empty())
            out += wrapped(
                fmt::format("{} made at {}: not the program's to free", human_bytes(share.bytes), where),
                indent);
        else
            out += wrapped(fmt::format("{} made at {}: not reached from the program's objects{}",
                                       human_bytes(share.bytes), where,
                                       snapshot.stopped
                                           ? fmt::format(" (the search stopped after {:.1f} s and {} "
                                                         "objects)",
                                                         snapshot.seconds, snapshot.objects)
                                           : std::string()),
                           indent);
    }
}

// When gpuleak.why() found what held a site: "at the program's exit (3.54 s)", "when memory ran out
// (2.10 s)", "at end of epoch 3 (12.30 s)".
std::string held_when(const RetainerSnapshot& snapshot) {
    const double seconds = seconds_of(snapshot.time_ns);
    switch (snapshot.moment) {
    case RetainerMoment::Exit:
        return fmt::format("at the program's exit ({:.2f} s)", seconds);
    case RetainerMoment::OutOfMemory:
        return fmt::format("when memory ran out ({:.2f} s)", seconds);
    case RetainerMoment::PhaseEnd:
    case RetainerMoment::OnDemand:
        break;
    }
    return fmt::format("at {} ({:.2f} s)", printable(snapshot.label), seconds);
}

// What the process's sites above said already, said once: advice, and holders described in full.
struct SaidAbove {
    std::set<std::string> advice;
    // Each holder's short name (its root's name: "`results`"), and the full name it stands for.
    std::map<std::string, std::string> holders;
};

// A holder by its full name the first time; after, by its name alone ("`results`"), where that name stood
// for this holder only (`model` the parameters' holder and `model` the gradients' stay apart).
std::string holder_name(const Retainer& holder, SaidAbove& said) {
    const std::string name = retainer_name(holder);
    const size_t quoted = holder.root.starts_with('`') ? holder.root.find("`, ", 1) : std::string::npos;
    if (quoted == std::string::npos)
        return name;
    const std::string short_name = printable(holder.root.substr(0, quoted + 1));
    const auto [said_as, added] = said.holders.try_emplace(short_name, name);
    return !added && said_as->second == name ? short_name : name;
}

void append_site(std::string& out, ProcessReport& report, const LeakSite& site, size_t number,
                 const ReportOptions& options, const Style& style, SaidAbove& said) {
    if (site.before_attach) {
        out += fmt::format("  #{} before attach: held when gpuleak attach began recording\n", number);
        out +=
            wrapped(fmt::format("{} in {}, listed from PyTorch's allocator then; what made them, and when, "
                                "is not known",
                                human_bytes(site.bytes), allocations_of(site.kind, site.count)),
                    "          ", "        ");
        return;
    }
    StackFrames& stacks = *report.stacks;
    const bool python_program = report.model.header.python_version != 0;
    // The program's line leads: it is what its author knows the site by. Without one, in a Python
    // program, what a library keeps it for says more than the library's function.
    const ReportFrame* own = program_frame_of(stacks, site.stack_id, options);
    const std::string purpose = site_purpose(site, stacks);
    const bool purpose_leads = own == nullptr && python_program && !purpose.empty() && !options.native;
    const std::string label = fmt::format("  #{} ", number);
    out += label +
           (own != nullptr  ? program_line_text(*own, kWrapColumn - label.size())
            : purpose_leads ? purpose
                            : printable(stacks.describe(site.stack_id, false))) +
           "\n";
    out += wrapped(fmt::format("{} in {}, {}", human_bytes(site.bytes), allocations_of(site.kind, site.count),
                               when_made(report.model, site)),
                   "          ", "        ");
    // What the line called comes with it; a stack shown by its frames, last.
    const ProgramView view = text_view(stacks, site.stack_id, options);
    const bool short_stack = own != nullptr || (python_program && !view.calls.empty());
    if (short_stack)
        append_frames(out, stacks, site.stack_id, view, options, style, python_program, own);
    // What a library keeps it for, where its frames say so: not the program's to free.
    if (!purpose.empty() && !purpose_leads)
        out += style.dim(fmt::format("        ({})", purpose)) + "\n";
    if (site.freed_at_exit > 0)
        out +=
            style.dim(site.freed_at_exit == site.bytes
                          ? std::string("        (freed only as the process exited, after the program's code "
                                        "ended)")
                          : fmt::format("        ({} of it freed only as the process exited, after the "
                                        "program's code ended)",
                                        human_bytes(site.freed_at_exit))) +
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
            holders.push_back(fmt::format("{} {} {}", human_bytes(site.held_by[i].bytes),
                                          i == 0 ? "held by" : "by",
                                          holder_name(snapshot.holders[site.held_by[i].holder], said)));
        if (site.held_by.size() > kHoldersShown)
            holders.push_back(fmt::format("and {} more holders", site.held_by.size() - kHoldersShown));
        out += wrapped(fmt::format("{}: {}", held_when(snapshot), fmt::join(holders, "; ")), "        ");
        const HeldBy& largest = site.held_by.front();
        const Retainer& holder = snapshot.holders[largest.holder];
        append_chain(out, holder, holder.sites[largest.share].path, "          ", said.advice);
    }
    if (!short_stack)
        append_frames(out, stacks, site.stack_id, view, options, style, python_program);
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

void append_host_timeline(std::string& out, const std::vector<HostPoint>& points, const Style& style) {
    constexpr size_t kRows = 8;
    if (points.size() < 3)
        return;
    out += "\n" + style.bold("Host memory over time:") + "\n";
    constexpr const char* kRow = "  {:<9}{:>9} {}\n";
    out += fmt::format(kRow, "over time", "t",
                       fmt::format("{:>10} {:>10} {:>10} {:>10} {:>10} {:>10}", "RSS", "USS", "PSS",
                                   "allocated", "shared", "swap"));
    std::string previous;
    for (const HostPoint* point : timeline_rows(points, kRows)) {
        const bool proportional = point->has(format::HostField::Proportional);
        const bool status = point->has(format::HostField::Status);
        const auto shown = [](bool read, uint64_t value) {
            return read ? human_bytes(value) : std::string("-");
        };
        std::string figures =
            fmt::format("{:>10} {:>10} {:>10} {:>10} {:>10} {:>10}", human_bytes(point->rss),
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
                                  role.empty() ? std::string() : ", " + role, short_command(model))) +
           "\n";
    if (!report.started_at.empty())
        out += fmt::format("  started    by pid {} at {}\n", model.header.ppid, printable(report.started_at));
    if (report.target)
        out += fmt::format("  runs       {}\n", printable(python_frame_name(*report.target)));
    if (model.header.host_only())
        out += "  gpu        none: the process never used CUDA; its host memory was sampled\n";
    if (model.header.attached())
        out += wrapped("gpuleak attach began recording it while it ran: times count from then, and what it "
                       "made before is not in this report",
                       std::string(13, ' '), "  attached   ");
    out += fmt::format("  trace      {}\n", printable(model.path));
    if (model.header.simulated_device())
        out += "             (simulated CUDA device: no real GPU was used)\n";
    // Growth is judged on what the program's own code did, before Python's finalization.
    out +=
        wrapped(model.code_end_ns ? fmt::format("{}; its code ended at {:.1f} s, as Python began finalizing",
                                                ended_text(model), seconds_of(*model.code_end_ns))
                                  : ended_text(model),
                "             ", "  ended      ");
    // Under the header's values, with its label on the first line.
    if (model.error)
        out += wrapped(program_error_text(model, *model.error), std::string(13, ' '), "  error      ");
    if (!model.cell_errors.empty())
        out += wrapped(cell_errors_text(model), std::string(13, ' '), "  raised     ");
    for (const DeviceSummary& device : model.devices) {
        out += wrapped(
            fmt::format("reserved peak {}, final {}; allocated peak {}, final {}{}",
                        human_bytes(device.peak_reserved), human_bytes(device.final_reserved),
                        human_bytes(device.peak_allocated), human_bytes(device.final_allocated),
                        model.reports_blocks ? "" : " (no allocator reported blocks: allocated = reserved)"),
            "             ", fmt::format("  device {:<3} ", device.device));
        if (device.capacity)
            out +=
                fmt::format("             capacity {}, lowest free seen {} ({} in use per the driver then)\n",
                            human_bytes(*device.capacity), human_bytes(*device.lowest_free),
                            human_bytes(*device.peak_used_by_driver));
    }
    if (model.peak_pinned_host > 0)
        out += fmt::format("  pinned     host memory peak {}, final {}\n",
                           human_bytes(model.peak_pinned_host), human_bytes(model.final_pinned_host));
    if (model.peak_managed > 0)
        out += fmt::format("  managed    peak {}\n", human_bytes(model.peak_managed));
    if (const HostPoint* first = model.host.first()) {
        // One line: the samples over time, after the sites, have the rest.
        const HostPoint* end = code_end_host_point(model);
        const std::string then = end == first
                                     ? std::string()
                                     : fmt::format(", {} {}", human_bytes(end->rss),
                                                   end == model.host.last() ? "at the end" : "before exit");
        const std::string uss =
            model.host.peak_uss ? fmt::format(", USS {}", human_bytes(*model.host.peak_uss)) : std::string();
        out += wrapped(fmt::format("RSS {} at start{}; peak RSS {}{}", human_bytes(first->rss), then,
                                   human_bytes(model.host.peak_rss), uss),
                       "             ", "  host       ");
        if (model.host.cgroup_limit && model.host.peak_cgroup)
            out += fmt::format("  cgroup     memory peak {} of its limit {}\n",
                               human_bytes(*model.host.peak_cgroup), human_bytes(*model.host.cgroup_limit));
    }
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
    SaidAbove said;
    // The diagnosis above gave its top site's advice already.
    if (const auto& leak = report.diagnosis.leak; leak && leak->cause == LeakCause::Growth) {
        const LeakSite& top = model.leak_sites[leak->sites.front()];
        if (!top.held_by.empty()) {
            const Retainer& holder =
                model.retainers[top.held_by.front().snapshot].holders[top.held_by.front().holder];
            if (!holder.advice.empty())
                said.advice.insert(holder.advice.front());
        }
    }
    for (size_t i = 0; i < model.growth_sites.size() && i < options.top; ++i) {
        if (i == 0)
            out +=
                style.bold("Growing: held by the program and made through its work (largest first):") + "\n";
        append_site(out, report, model.leak_sites[model.growth_sites[i]], i + 1, options, style, said);
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
        append_site(out, report, site, shown, options, style, said);
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
        out += wrapped(fmt::format("{} in {} {} segment{}, {} {}", human_bytes(site.bytes), site.count,
                                   format::kind_name(site.kind), site.count == 1 ? "" : "s",
                                   site.before_attach ? "made" : "for",
                                   printable(site_place(site, *report.stacks))),
                       "    ", "  ");
    }
    if (segments > 0)
        out += "\n";

    for (size_t i = 0; i < model.failures.size() && i < options.top; ++i) {
        const FailureSummary& failure = model.failures[i];
        if (i == 0)
            out += style.bold("Failed allocations:") + "\n";
        std::string then = failure.reserved_then ? fmt::format("; {} reserved on the device then",
                                                               human_bytes(*failure.reserved_then))
                                                 : "; what was live then is older than the event ring";
        std::string free_then =
            failure.free_bytes ? fmt::format(", {} free", human_bytes(*failure.free_bytes)) : "";
        out +=
            wrapped(fmt::format("#{} {} of {} memory on device {} at {:.2f} s, {}{}{}", i + 1,
                                human_bytes(failure.bytes), format::kind_name(failure.kind), failure.device,
                                seconds_of(failure.time_ns), failure_cause(failure), free_then, then),
                    "      ", "  ");
        append_frames(out, *report.stacks, failure.stack_id,
                      text_view(*report.stacks, failure.stack_id, options), options, style,
                      model.header.python_version != 0);
        for (const LiveSiteAt& site : failure.top_sites_then) {
            out += wrapped(fmt::format("held then: {} in {} allocation{} from {}", human_bytes(site.bytes),
                                       site.count, site.count == 1 ? "" : "s",
                                       printable(report.stacks->describe(site.stack_id))),
                           "        ", "      ");
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
    // The recording's own figures and the host's samples after what a reader looks for first: the
    // verdict and the sites.
    if (!out.ends_with("\n\n"))
        out += "\n";
    if (!model.header.host_only())
        out += style.bold("Recorded:") +
               fmt::format(" {} events ({} overwritten in the ring); failed allocations {}\n", model.events,
                           model.events_overwritten, model.failed_allocations);
    append_host_timeline(out, model.host.points, style);
    for (const std::string& warning : model.warnings)
        out += style.dim("  warning: " + printable(warning)) + "\n";
    out += "\n";
}

// A job's ranks, one row each with its top site under it, then what stands out across them: the ranks
// whose memory stands apart from their peers', and the leaks at the same line on several ranks (or on one
// rank only).
// "ranks 1, 4 and 7"; past kRanksNamed, "ranks 0, 1, 2, ... 15 and 1008 more".
std::string ranks_named(std::vector<int> ranks) {
    constexpr size_t kRanksNamed = 16;
    std::sort(ranks.begin(), ranks.end());
    if (ranks.size() > kRanksNamed)
        return fmt::format(
            "ranks {} and {} more",
            fmt::join(ranks.begin(), ranks.begin() + static_cast<std::ptrdiff_t>(kRanksNamed), ", "),
            ranks.size() - kRanksNamed);
    if (ranks.size() == 1)
        return fmt::format("rank {}", ranks.front());
    return fmt::format("ranks {} and {}", fmt::join(ranks.begin(), ranks.end() - 1, ", "), ranks.back());
}

constexpr const char* kContextAdvice =
    "A context takes device memory of its own, hundreds of MiB on a real GPU, which no allocation counts. A "
    "rank that touches the GPU before torch.cuda.set_device(local_rank) makes its context, and allocates, on "
    "the device current then; call it first.";

// "made a context and reserved 2.0 MiB", "made a context", "reserved 2.0 MiB".
std::string intrusion_deed(const IntrudingRank& intruder) {
    if (intruder.context && intruder.peak_reserved > 0)
        return fmt::format("made a context and reserved {}", human_bytes(intruder.peak_reserved));
    return intruder.context ? std::string("made a context")
                            : "reserved " + human_bytes(intruder.peak_reserved);
}

std::string first_at(const std::string& site) {
    return site.empty() ? std::string() : " (first at " + site + ")";
}

// Findings of one kind about many ranks are told once for the lot, with the ranks named: a job of a
// thousand ranks that all ran out of memory at one line says so in one sentence.
constexpr size_t kToldOneByOne = 4;

void tell_apart(std::vector<std::string>& findings, const JobFacts& job, ApartBy by) {
    std::vector<const ApartRank*> apart;
    for (const ApartRank& each : job.apart)
        if (each.by == by)
            apart.push_back(&each);
    const bool peak = by == ApartBy::Peak;
    const auto figure = [&](const ApartRank& each) {
        const RankRow& row = job.ranks[each.index];
        return peak ? row.peak_reserved : row.leaked;
    };
    const auto times = [&](const ApartRank& each) {
        return static_cast<double>(figure(each)) /
               static_cast<double>(std::max<uint64_t>(each.peers_median, 1));
    };
    if (apart.size() <= kToldOneByOne) {
        for (const ApartRank* each : apart) {
            const int rank = job.ranks[each->index].rank;
            findings.push_back(
                peak ? fmt::format(
                           "Rank {} stands apart: its reserved memory peaked at {}, {:.1f}x the median of "
                           "the other ranks' peaks, {}.",
                           rank, human_bytes(figure(*each)), times(*each), human_bytes(each->peers_median))
                     : fmt::format(
                           "Rank {} grows apart: where it grows held {} by its end, {:.1f}x the median of "
                           "what the other ranks' growth held, {}.",
                           rank, human_bytes(figure(*each)), times(*each), human_bytes(each->peers_median)));
        }
        return;
    }
    std::vector<int> ranks;
    double least = std::numeric_limits<double>::max();
    double most = 0;
    for (const ApartRank* each : apart) {
        ranks.push_back(job.ranks[each->index].rank);
        least = std::min(least, times(*each));
        most = std::max(most, times(*each));
    }
    findings.push_back(fmt::format(
        fmt::runtime(peak ? "{} ranks stand apart: their reserved memory peaked at {:.1f}x to {:.1f}x "
                            "the median of the other ranks' peaks ({})."
                          : "{} ranks grow apart: where they grow held {:.1f}x to {:.1f}x the median "
                            "of what the other ranks' growth held ({})."),
        apart.size(), least, most, ranks_named(ranks)));
}

void tell_intruders(std::vector<std::string>& findings, const JobFacts& job) {
    if (job.intruding.size() <= kToldOneByOne) {
        for (const IntrudingRank& intruder : job.intruding)
            findings.push_back(fmt::format("Rank {} {} on device {}, rank {}'s{}. {}",
                                           job.ranks[intruder.index].rank, intrusion_deed(intruder),
                                           intruder.device, intruder.owner, first_at(intruder.first_site),
                                           kContextAdvice));
        return;
    }
    std::map<std::string, std::vector<int>> by_site;
    for (const IntrudingRank& intruder : job.intruding)
        by_site[intruder.first_site].push_back(job.ranks[intruder.index].rank);
    for (const auto& [site, ranks] : by_site)
        findings.push_back(
            ranks.size() == 1
                ? fmt::format("Rank {} made a context or memory on another rank's device of its machine{}.",
                              ranks.front(), first_at(site))
                : fmt::format(
                      "{} ranks ({}) made contexts or memory on another rank's device of their machine{}.",
                      ranks.size(), ranks_named(ranks), first_at(site)));
    findings.emplace_back(kContextAdvice);
}

void tell_failures(std::vector<std::string>& findings, const JobFacts& job, const EndedText& ended) {
    std::vector<const FailedRank*> out_of_memory;
    std::vector<const FailedRank*> killed;
    for (const FailedRank& failed : job.failed) {
        if (failed.out_of_memory)
            out_of_memory.push_back(&failed);
        if (failed.killed)
            killed.push_back(&failed);
    }
    if (out_of_memory.size() <= kToldOneByOne) {
        for (const FailedRank* failed : out_of_memory) {
            const std::string reserved =
                failed->reserved_then
                    ? fmt::format(" with {} reserved there", human_bytes(*failed->reserved_then))
                    : std::string();
            findings.push_back(fmt::format("Rank {} ran out of memory at {}: it asked for {} on device {}{}.",
                                           job.ranks[failed->index].rank, failed->failure_site,
                                           human_bytes(failed->asked_bytes), failed->device, reserved));
        }
    } else {
        std::map<std::string, std::vector<int>> by_site;
        for (const FailedRank* failed : out_of_memory)
            by_site[failed->failure_site].push_back(job.ranks[failed->index].rank);
        for (const auto& [site, ranks] : by_site)
            findings.push_back(fmt::format(
                "{} ran out of memory at {}.",
                ranks.size() == 1 ? ranks_named(ranks)
                                  : fmt::format("{} ranks ({})", ranks.size(), ranks_named(ranks)),
                site));
    }
    if (killed.size() <= kToldOneByOne) {
        for (const FailedRank* failed : killed) {
            const RankRow& row = job.ranks[failed->index];
            findings.push_back(fmt::format("Rank {} {}; it held {} reserved at its end.", row.rank,
                                           ended(row), human_bytes(row.final_reserved)));
        }
        return;
    }
    // The first to end is where to look: a launcher stops the others once one rank has failed.
    const FailedRank* first =
        *std::min_element(killed.begin(), killed.end(), [](const FailedRank* a, const FailedRank* b) {
            return a->ended_realtime_ns < b->ended_realtime_ns;
        });
    std::vector<int> ranks;
    ranks.reserve(killed.size());
    for (const FailedRank* failed : killed)
        ranks.push_back(job.ranks[failed->index].rank);
    findings.push_back(fmt::format("{} ranks were killed ({}). The first to end, rank {}, {}.", killed.size(),
                                   ranks_named(ranks), job.ranks[first->index].rank,
                                   ended(job.ranks[first->index])));
}

} // namespace

std::vector<std::string> job_findings(const JobFacts& job, const EndedText& ended) {
    std::vector<std::string> findings;
    tell_apart(findings, job, ApartBy::Peak);
    tell_apart(findings, job, ApartBy::Growth);
    tell_intruders(findings, job);
    tell_failures(findings, job, ended);
    for (const SharedLeak& leak : job.shared_leaks)
        findings.push_back(fmt::format(
            "{} of {} ranks leak at {} ({}): {} held there over them as their code ended.", leak.ranks.size(),
            job.ranks.size(), leak.site, ranks_named(leak.ranks), human_bytes(leak.bytes)));
    const auto leaking = std::count_if(job.ranks.begin(), job.ranks.end(),
                                       [](const RankRow& row) { return row.verdict == DiagnosisKind::Leak; });
    if (leaking == 1) {
        const RankRow& row = *std::find_if(job.ranks.begin(), job.ranks.end(), [](const RankRow& each) {
            return each.verdict == DiagnosisKind::Leak;
        });
        findings.push_back(fmt::format("Only rank {} leaks{}; the other ranks do not.", row.rank,
                                       row.top_site.empty() ? std::string() : ", at " + row.top_site));
    }
    return findings;
}

namespace {

void append_job_table(std::string& out, const JobFacts& job, const EndedText& ended, const Style& style) {
    const std::string world = job.world_size > 0 ? fmt::format(" of {}", job.world_size) : std::string();
    const std::string title =
        job.id.empty() ? fmt::format("{} ranks{}:", job.ranks.size(), world)
                       : fmt::format("Job {}, {} ranks{}:", printable(job.id), job.ranks.size(), world);
    out += style.bold(title) + "\n";
    // Within the report's 100 columns; peak and final of each measure.
    constexpr const char* kRow = "  {:>5}  {:<14} {:>5} {:<7} {:>9} {:>9} {:>9} {:>9}  {}\n";
    constexpr size_t kHostColumns = 14;
    constexpr size_t kDevicesColumns = 7;
    out += fmt::format(kRow, "rank", "host", "local", "devices", "reserved", "final", "allocated", "final",
                       "diagnosis");
    for (const RankRow& row : job.ranks) {
        const std::string devices =
            row.devices.empty() ? std::string("-") : fmt::format("{}", fmt::join(row.devices, ","));
        out += fmt::format(kRow, row.rank, cut_to_columns(printable(row.host), kHostColumns),
                           row.local_rank >= 0 ? std::to_string(row.local_rank) : std::string("-"),
                           cut_to_columns(devices, kDevicesColumns), human_bytes(row.peak_reserved),
                           human_bytes(row.final_reserved), human_bytes(row.peak_allocated),
                           human_bytes(row.final_allocated), diagnosis_kind_name(row.verdict));
        if (!row.top_site.empty())
            out += style.dim(fmt::format("         {} {}",
                                         row.verdict == DiagnosisKind::Leak ? "grows at" : "holds most at",
                                         row.top_site)) +
                   "\n";
    }
    for (const std::string& finding : job_findings(job, ended))
        out += wrapped(finding, "  ");
    out += "\n";
}

void append_process_table(std::string& out, std::vector<ProcessReport>& reports, const Style& style) {
    out += style.bold(fmt::format("{} processes:", reports.size())) + "\n";
    // Within the report's 100 columns: each process's section has the rest (its parent, final figures).
    constexpr const char* kRow = "  {:>7}  {:<8} {:>9} {:>9} {:>9}  {:<15} {:<13} {}\n";
    out += fmt::format(kRow, "pid", "ended", "reserved", "RSS peak", "USS peak", "diagnosis", "host memory",
                       "process");
    for (ProcessReport& report : reports) {
        const ProcessModel& model = report.model;
        uint64_t peak = 0;
        for (const DeviceSummary& device : model.devices)
            peak += device.peak_reserved;
        const char* how = ended_how(model);
        std::string end = model.header.end.state == format::EndState::Exited
                              ? fmt::format("{} {}", how, model.header.end.exit_code)
                          : model.header.end.state == format::EndState::Signaled
                              ? fmt::format("{} {}", how, model.header.end.signal)
                              : std::string(how);
        std::string who = role_text(model.role);
        if (who.empty()) {
            // Cut at the line's end: the process's section heads with the whole command.
            constexpr size_t kCommandColumns = 19;
            who = cut_to_columns(short_command(model), kCommandColumns);
        }
        // A function of the program's own says more than the role; a library's (a Pool's worker loop) does
        // not.
        if (report.target && is_program_frame(*report.target))
            who += " running " + printable(report.target->function);
        const bool sampled = model.host.first() != nullptr;
        const std::string rss = sampled ? human_bytes(model.host.peak_rss) : std::string("-");
        const std::string uss =
            sampled && model.host.peak_uss ? human_bytes(*model.host.peak_uss) : std::string("-");
        out += fmt::format(
            fmt::runtime(kRow), model.header.pid, end,
            model.header.host_only() ? std::string("-") : human_bytes(peak), rss, uss,
            diagnosis_kind_name(report.diagnosis.kind),
            report.diagnosis.host_ram ? host_growth_cause_name(report.diagnosis.host_ram->cause) : "-", who);
    }
    out += "\n";
}

// Each device that several processes used: what they held together, and each one's share. At most
// kSharedDevicesShown devices and kDeviceUsersShown users of each: a job of a thousand ranks has a device
// per eight of them; the JSON report has them all.
// `who` names a process of the run (DeviceUser::process) as the process table does.
void append_shared_devices(std::string& out, const std::vector<SharedDevice>& devices,
                           const std::function<std::string(size_t)>& who, const Style& style) {
    constexpr size_t kSharedDevicesShown = 16;
    constexpr size_t kDeviceUsersShown = 8;
    const bool several_hosts = std::any_of(devices.begin(), devices.end(), [&](const SharedDevice& device) {
        return device.host != devices.front().host;
    });
    for (size_t shown = 0; shown < devices.size() && shown < kSharedDevicesShown; ++shown) {
        const SharedDevice& device = devices[shown];
        const std::string where = several_hosts
                                      ? fmt::format("Device {} on {}", device.device, printable(device.host))
                                      : fmt::format("Device {}", device.device);
        const std::string of =
            device.capacity ? fmt::format(" of its {}", human_bytes(*device.capacity)) : std::string();
        const std::string contexts =
            device.contexts == 0 ? std::string()
            : device.contexts == 1
                ? ", and one of them made a context there, which takes hundreds of MiB on a real GPU that no "
                  "allocation counts"
                : fmt::format(
                      ", and {} of them made a context there, each of which takes hundreds of MiB on a "
                      "real GPU that no allocation counts",
                      device.contexts);
        out += style.bold(wrapped(
            fmt::format(
                "{} was used by {} processes: together they reserved at most {} at once{}{}. Each "
                "process's own figures (torch.cuda.memory_allocated(), for one) count only its share.",
                where, device.users.size(), human_bytes(device.peak_reserved), of, contexts),
            ""));
        // Workers of a DataLoader that made contexts: the dataset touched CUDA.
        const auto worker =
            std::find_if(device.users.begin(), device.users.end(),
                         [&](const DeviceUser& user) { return user.context && user.dataloader_worker; });
        if (worker != device.users.end())
            out += wrapped(
                fmt::format("DataLoader workers made contexts of their own there{}: each worker that "
                            "touches CUDA holds its own share of the device. Keep CUDA out of the "
                            "dataset, and move each batch to the GPU in the training loop.",
                            worker->context_site.empty() ? std::string()
                                                         : " (first at " + worker->context_site + ")"),
                "");
        constexpr const char* kRow = "  {:>7}  {:<30} {:>9} {:>9}  {}\n";
        out += fmt::format(kRow, "pid", "process", "reserved", "final", "context");
        for (size_t user_shown = 0; user_shown < device.users.size() && user_shown < kDeviceUsersShown;
             ++user_shown) {
            const DeviceUser& user = device.users[user_shown];
            const std::string numbered =
                user.device != device.device ? fmt::format(" (its device {})", user.device) : std::string();
            out += fmt::format(kRow, user.pid, cut_to_columns(who(user.process) + numbered, 30),
                               human_bytes(user.peak_reserved), human_bytes(user.final_reserved),
                               user.context ? "yes" : "no");
            if (!user.context_site.empty())
                out += style.dim(fmt::format("           made its context at {}", user.context_site)) + "\n";
        }
        if (device.users.size() > kDeviceUsersShown)
            out += fmt::format("  ... and {} more processes\n", device.users.size() - kDeviceUsersShown);
        out += "\n";
    }
    if (devices.size() > kSharedDevicesShown)
        out += fmt::format("{} more devices were used by several processes (the JSON report lists them).\n\n",
                           devices.size() - kSharedDevicesShown);
}

// The whole run's memory at its fullest, where several processes were traced: after them, as what they
// add up to.
void append_run_memory(std::string& out, std::vector<ProcessReport>& reports) {
    if (const std::optional<RunMemoryFacts>& peak = reports.front().diagnosis.run_memory) {
        const std::string role = role_text(peak->largest_role);
        out += wrapped(
            fmt::format("Run memory at its fullest, {:.1f} s into the run: {}. The process with the most "
                        "resident memory then was pid {}{}, with {}.",
                        seconds_of(peak->run_time_ns), run_memory_held(*peak), peak->largest_pid,
                        role.empty() ? std::string() : ", " + role, human_bytes(peak->largest_rss)),
            "");
    }
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
    return (change < 0 ? "-" : "+") + human_bytes(static_cast<uint64_t>(change < 0 ? -change : change));
}

// "0, now 1.2 GiB in 300 blocks", "20.0 MiB in 2 device allocations, now 0".
std::string then_and_now(const SiteChange& change) {
    const auto held = [&](const std::optional<LiveSiteAt>& site) {
        return site && site->count > 0 ? fmt::format("{} in {}", human_bytes(site->bytes),
                                                     allocations_of(change.kind, site->count))
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
                               human_bytes(comparison.before_bytes), human_bytes(comparison.after_bytes),
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
        append_frames(
            out, stacks, stack_id, text_view(stacks, stack_id, options), options, style,
            (site.after ? comparison.after : comparison.before).report->model.header.python_version != 0);
    }
    if (shown.size() < comparison.changes.size())
        out += style.dim(fmt::format("\n  ... {} more, smaller (--top and --min-bytes choose)",
                                     comparison.changes.size() - shown.size())) +
               "\n";
    return out;
}

void render_text(ReportSet& reports, const ReportOptions& options, const ReportSink& write) {
    const Style style(options.color);
    std::vector<ProcessReport>& all = reports.all();
    std::string out;
    if (!all.empty() && all.front().job && all.front().job->ranks.size() > 1)
        append_job_table(out, *all.front().job, ended_texts(all), style);
    if (all.size() > 1)
        append_process_table(out, all, style);
    if (!all.empty() && all.front().shared_devices)
        append_shared_devices(
            out, *all.front().shared_devices,
            [&](size_t process) { return process_name(all[process].model); }, style);
    for (size_t i = 0; i < all.size(); ++i) {
        append_process(out, reports.whole(i), options, style);
        write(out);
        out.clear();
    }
    if (all.size() > 1)
        append_run_memory(out, all);
    write(out);
}

std::string render_text(ReportSet& reports, const ReportOptions& options) {
    std::string text;
    render_text(reports, options, [&](std::string_view part) { text += part; });
    return text;
}

std::string render_merged_text(const MergedReport& merged, const ReportOptions& options) {
    const Style style(options.color);
    constexpr size_t kSourcesNamed = 8;
    std::string out =
        style.bold(fmt::format("Merged from {} report{} of the job's runs:", merged.sources.size(),
                               merged.sources.size() == 1 ? "" : "s")) +
        "\n";
    for (size_t i = 0; i < merged.sources.size() && i < kSourcesNamed; ++i)
        out += "  " + printable(merged.sources[i]) + "\n";
    if (merged.sources.size() > kSourcesNamed)
        out += fmt::format("  ... and {} more\n", merged.sources.size() - kSourcesNamed);
    out += "\n";
    if (merged.job.ranks.size() > 1)
        append_job_table(
            out, merged.job, [&](const RankRow& row) { return merged.ended_of(row); }, style);
    append_shared_devices(
        out, merged.shared_devices, [&](size_t process) { return printable(merged.process_names[process]); },
        style);
    out +=
        wrapped(fmt::format("{} processes in all ({} ranks). Each run's report.txt, beside its report.json, "
                            "tells its processes one by one.",
                            merged.processes.size(), merged.job.ranks.size()),
                "");
    return out;
}

} // namespace gpuleak::analyzer
