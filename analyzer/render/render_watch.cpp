#include "render/render_watch.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <fmt/format.h>
#include <vector>

#include "common/printable.h"
#include "render/byte_sizes.h"
#include "render/cuda_errors.h"
#include "render/diagnosis_text.h"
#include "render/text_style.h"
#include "render/wrapped_text.h"
#include "report/stack_view.h"

namespace gpuleak::analyzer {

namespace {

bool still_running(const ProcessModel& model) {
    return model.header.end.state == format::EndState::Running &&
           model.header.end.running_when_opened == true;
}

// The most of `measure` in each of `options.history_columns` equal stretches of the last
// `options.history_seconds` of the process's run; before the first point, and in a stretch without one,
// the latest value holds.
std::vector<uint64_t> history_of(const std::vector<DevicePoint>& timeline, uint64_t DevicePoint::*measure,
                                 uint64_t now_ns, const WatchOptions& options) {
    const auto span_ns = static_cast<uint64_t>(options.history_seconds * 1e9);
    const uint64_t start = now_ns > span_ns ? now_ns - span_ns : 0;
    const size_t columns = std::max<size_t>(options.history_columns, 1);
    const uint64_t width = std::max<uint64_t>((now_ns - start) / columns, 1);
    std::vector<uint64_t> most(columns, 0);
    uint64_t latest = 0;
    auto point = timeline.begin();
    for (; point != timeline.end() && point->time_ns < start; ++point)
        latest = (*point).*measure;
    for (size_t column = 0; column < most.size(); ++column) {
        const uint64_t end = column + 1 == most.size() ? now_ns + 1 : start + (column + 1) * width;
        most[column] = latest;
        for (; point != timeline.end() && point->time_ns < end; ++point) {
            latest = (*point).*measure;
            most[column] = std::max(most[column], latest);
        }
    }
    return most;
}

// Each value as one of eight heights, from nothing to `top`.
std::string bars_of(const std::vector<uint64_t>& values, uint64_t top) {
    static constexpr std::array<const char*, 8> kHeights = {"▁", "▂", "▃", "▄", "▅", "▆", "▇", "█"};
    std::string bars;
    for (const uint64_t value : values) {
        const double height = top == 0 ? 0 : static_cast<double>(value) / static_cast<double>(top);
        bars += kHeights[std::min(kHeights.size() - 1, static_cast<size_t>(std::lround(height * 7)))];
    }
    return bars;
}

void append_devices(std::string& out, const ProcessModel& model, const WatchOptions& options,
                    const Style& style) {
    for (const DeviceSummary& device : model.devices) {
        const std::string of =
            device.capacity ? fmt::format(" of {}", human_bytes(*device.capacity)) : std::string();
        out += fmt::format("  device {}{}: reserved {}, allocated {} (peak reserved {})\n", device.device, of,
                           style.bold(human_bytes(device.final_reserved)),
                           human_bytes(device.final_allocated), human_bytes(device.peak_reserved));
        // Both on the reserved bytes' scale: what is allocated is a part of what is reserved.
        const std::vector<uint64_t> reserved =
            history_of(device.timeline, &DevicePoint::reserved, model.duration_ns, options);
        const std::vector<uint64_t> allocated =
            history_of(device.timeline, &DevicePoint::allocated, model.duration_ns, options);
        const uint64_t top = *std::max_element(reserved.begin(), reserved.end());
        const double shown = std::max(1.0, std::min(options.history_seconds, seconds_of(model.duration_ns)));
        out += fmt::format("    {} reserved   {}\n", bars_of(reserved, top),
                           style.dim(fmt::format("the last {:.0f} s, 0 to {}", shown, human_bytes(top))));
        out += fmt::format("    {} allocated\n", bars_of(allocated, top));
    }
}

// A growing site, as its lines say it: a process's whole report is at hand one at a time (ReportSet), so
// what the frame says of each is said while it is.
struct GrowingSite {
    double bytes_per_second = 0;
    std::string text;
};

std::string line_text(const ReportFrame& frame) {
    const ProgramLine line = program_line(frame);
    return printable(line.text.empty() ? line.where : line.where + "  " + line.text);
}

// The program's line where the stack has one ("train.py:88  losses.append(loss)"), else its place; and
// where the program's own code was called from outside it, the outermost of its callers on a line of its
// own: the line the user ran (a notebook's cell) when a helper of theirs made the memory.
std::string site_lines(StackFrames& stacks, uint32_t stack_id, const Style& style) {
    const ProgramView view = program_view(stacks.frames(stack_id));
    if (view.own == nullptr)
        return printable(stacks.describe(stack_id)) + "\n";
    std::string out = line_text(*view.own) + "\n";
    const auto outermost =
        std::find_if(view.callers.rbegin(), view.callers.rend(),
                     [](const ProgramView::Caller& caller) { return caller.frame != nullptr; });
    if (outermost != view.callers.rend())
        out += style.dim("      from " + line_text(*outermost->frame)) + "\n";
    return out;
}

// When the device is full at the rate that `sites` grow there together, where its size is known.
std::string full_in(const ProcessModel& model, int device_number, const std::vector<const LeakSite*>& sites,
                    bool running) {
    const DeviceSummary* device = device_summary(model, device_number);
    if (device == nullptr || !device->capacity || *device->capacity <= device->final_reserved)
        return {};
    double rate = 0;
    for (const LeakSite* site : sites)
        if (site->device == device_number)
            rate += site->bytes_per_second;
    if (rate <= 0)
        return {};
    const double seconds = static_cast<double>(*device->capacity - device->final_reserved) / rate;
    return fmt::format("; device {} {} full in {} at this rate", device_number,
                       running ? "is" : "would have been", human_duration(seconds));
}

// The sites of `report` that grow: while it runs, those that made memory in the last stretch the history
// shows (a site that stopped growing long ago grows no more); once it ended, all. What the program holds,
// rather than the pools (PyTorch's segments) that hold it for it and grow with it; the pools only where
// nothing of the program's own grows (a cache that grows).
void add_growing(std::vector<GrowingSite>& growing, ProcessReport& report, bool several,
                 const WatchOptions& options, const Style& style) {
    const ProcessModel& model = report.model;
    const auto recent_ns = static_cast<uint64_t>(options.history_seconds * 1e9);
    const bool running = still_running(model);
    const auto grows = [&](const LeakSite& site) {
        return site.growing && site.bytes_per_second > 0 &&
               (!running || site.last_ns + recent_ns >= model.duration_ns);
    };
    const auto pool = [](const LeakSite& site) { return site.segments || site.device_pool(); };
    const bool program_grows = std::any_of(model.leak_sites.begin(), model.leak_sites.end(),
                                           [&](const LeakSite& site) { return grows(site) && !pool(site); });
    std::vector<const LeakSite*> sites;
    for (const LeakSite& site : model.leak_sites)
        if (grows(site) && pool(site) != program_grows)
            sites.push_back(&site);
    const std::string who = several ? fmt::format("pid {}: ", model.header.pid) : std::string();
    for (const LeakSite* site : sites) {
        const std::string purpose = site_purpose(*site, *report.stacks);
        std::string text = "  " + who + site_lines(*report.stacks, site->stack_id, style);
        if (!purpose.empty())
            text.insert(text.find('\n'), fmt::format(" ({})", purpose));
        text += style.dim(fmt::format(
            "      {} in {}, +{}/s{}", human_bytes(site->bytes), allocations_of(site->kind, site->count),
            human_bytes(site->bytes_per_second), full_in(model, site->device, sites, running)));
        text += '\n';
        growing.push_back({site->bytes_per_second, std::move(text)});
    }
}

void append_growing(std::string& out, std::vector<GrowingSite>& growing, bool several, bool running,
                    const WatchOptions& options, const Style& style) {
    std::stable_sort(growing.begin(), growing.end(), [](const GrowingSite& a, const GrowingSite& b) {
        return a.bytes_per_second > b.bytes_per_second;
    });
    const char* heading = running   ? "Growing now"
                          : several ? "Growing when they ended"
                                    : "Growing when it ended";
    out += style.bold(growing.empty() ? fmt::format("{}: nothing", heading) : fmt::format("{}:", heading)) +
           "\n";
    for (size_t i = 0; i < growing.size() && i < options.growing_sites; ++i)
        out += growing[i].text;
    if (growing.size() > options.growing_sites)
        out += style.dim(fmt::format("  ... and {} more", growing.size() - options.growing_sites)) + "\n";
}

void append_failures(std::string& out, ProcessReport& report, bool several, const Style& style) {
    const ProcessModel& model = report.model;
    if (model.failures.empty())
        return;
    const FailureSummary& latest = model.failures.back();
    const std::string who = several ? fmt::format("pid {}: ", model.header.pid) : std::string();
    out +=
        style.bold(fmt::format("{}{} failed allocation{}", who, model.failures.size(),
                               model.failures.size() == 1 ? "" : "s")) +
        fmt::format(", the latest at {:.1f} s: {} on device {} ({}) at {}\n", seconds_of(latest.time_ns),
                    human_bytes(latest.bytes), latest.device,
                    latest.out_of_memory() ? std::string("out of memory") : cuda_error_meaning(latest.error),
                    printable(report.stacks->describe(latest.stack_id)));
}

// How it ended: the exception that ended it (it may be why it was watched), and its diagnosis.
void append_ending(std::string& out, ProcessReport& report, bool several) {
    const ProcessModel& model = report.model;
    const std::string who = several ? fmt::format("pid {}: ", model.header.pid) : std::string();
    if (model.error)
        out += wrapped(fmt::format("{}error: {}", who, program_error_text(model, *model.error)), "  ", "");
    out += wrapped(fmt::format("{}{}: {}", who, diagnosis_kind_name(report.diagnosis.kind),
                               diagnosis_text(model, report.diagnosis, *report.stacks)),
                   "  ", "");
}

void append_process_lines(std::string& out, const std::vector<ProcessReport>& processes, const Style& style) {
    out += style.bold(fmt::format("{} processes:", processes.size())) + "\n";
    constexpr const char* kRow = "  {:>7}  {:<8} {:>10} {:>10} {:>10}  {}\n";
    out += fmt::format(kRow, "pid", "state", "reserved", "allocated", "peak", "process");
    for (const ProcessReport& report : processes) {
        const ProcessModel& model = report.model;
        uint64_t reserved = 0;
        uint64_t allocated = 0;
        uint64_t peak = 0;
        for (const DeviceSummary& device : model.devices) {
            reserved += device.final_reserved;
            allocated += device.final_allocated;
            peak += device.peak_reserved;
        }
        out += fmt::format(fmt::runtime(kRow), model.header.pid, still_running(model) ? "running" : "ended",
                           human_bytes(reserved), human_bytes(allocated), human_bytes(peak),
                           cut_to_columns(process_name(model), 40));
    }
}

} // namespace

std::string render_watch_frame(ReportSet& reports, const WatchOptions& options) {
    const Style style(options.color);
    std::vector<ProcessReport>& all = reports.all();
    if (all.empty())
        return {};
    const bool several = all.size() > 1;
    const ProcessModel& first = all.front().model;
    const bool running = std::any_of(all.begin(), all.end(),
                                     [](const ProcessReport& report) { return still_running(report.model); });
    std::string out = style.bold(
        fmt::format("gpuleak watch: pid {} {}, {}", first.header.pid, cut_to_columns(process_name(first), 50),
                    still_running(first) ? fmt::format("running for {:.0f} s", seconds_of(first.duration_ns))
                                         : ended_text(first)));
    if (first.header.simulated_device())
        out += style.dim(" (simulated CUDA device)");
    out += "\n\n";
    if (several) {
        append_process_lines(out, all, style);
        out += "\n";
    }
    std::vector<GrowingSite> growing;
    std::string failures;
    std::string endings;
    for (size_t i = 0; i < all.size(); ++i) {
        ProcessReport& report = reports.whole(i);
        const ProcessModel& model = report.model;
        if (!model.devices.empty()) {
            if (several)
                out += fmt::format("pid {} {}\n", model.header.pid, cut_to_columns(process_name(model), 60));
            append_devices(out, model, options, style);
        }
        add_growing(growing, report, several, options, style);
        append_failures(failures, report, several, style);
        if (!running)
            append_ending(endings, report, several);
    }
    out += "\n";
    append_growing(out, growing, several, running, options, style);
    out += failures;
    if (!endings.empty())
        out += "\n" + endings;
    return out;
}

} // namespace gpuleak::analyzer
