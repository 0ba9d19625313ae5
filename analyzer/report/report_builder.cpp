#include "report/report_builder.h"

#include <algorithm>
#include <filesystem>
#include <fmt/format.h>
#include <map>
#include <optional>
#include <stdexcept>
#include <system_error>
#include <thread>
#include <type_traits>

#include "read/trace_error.h"
#include "read/trace_reader.h"
#include "report/job_facts.h"
#include "report/shared_devices.h"
#include "report/stack_view.h"
#include "report/symbolized_stacks.h"

namespace gpuleak::analyzer {

namespace {

// Reading debug info is a fixed cost that the model does not need (inflating libc's separate debug
// info alone takes some 40 ms), so a second thread pays it while the model is built. It is stopped
// once the model is done, between two modules: the rest is read as the report needs it, as it was
// without this. The stacks are that thread's alone (libdw is not thread-safe) from construction until
// the destructor has stopped and joined it, which it also does when building the model throws.
class DebugInfoReadAhead {
  public:
    explicit DebugInfoReadAhead(SymbolizedStacks& stacks) {
        try {
            thread_ = std::jthread([&stacks](const std::stop_token& stop) {
                // What failed here is left undone, and the report does it when it needs it, failing
                // where it did without the read-ahead: an exception must not end the process here.
                try {
                    stacks.read_ahead(stop);
                } catch (...) {
                }
            });
        } catch (const std::system_error&) {
            // No thread to be had (a limit on threads): the report reads the debug info as it goes.
        }
    }

  private:
    std::jthread thread_;
};

} // namespace

namespace {

bool python_with_source(const ReportFrame& frame) {
    return frame.python && !frame.file.empty();
}

// Where a stack without a frame of the program's own was made: its innermost Python frame, else its first
// native frame that is not PyTorch's caching allocator's own (which say nothing of who asked for the
// memory), else the first.
std::string library_place(const std::vector<ReportFrame>& all) {
    const auto python = std::find_if(all.begin(), all.end(), python_with_source);
    if (python != all.end())
        return python_frame_name(*python);
    const auto named = [](const ReportFrame& frame) { return !frame.function.empty(); };
    auto chosen = std::find_if(all.begin(), all.end(), [&](const ReportFrame& frame) {
        return named(frame) && !is_caching_allocator_frame(frame) && !is_cuda_library_frame(frame);
    });
    if (chosen == all.end())
        chosen = std::find_if(all.begin(), all.end(), named);
    if (chosen != all.end()) {
        const std::string function = short_function_name(chosen->function);
        return chosen->file.empty() ? function
                                    : fmt::format("{} ({}:{})", function, chosen->file, chosen->line);
    }
    return all.empty() ? std::string("an unknown place (no stack)")
                       : fmt::format("{}+{:#x}", all.front().module, all.front().module_offset);
}

// What a library's thread was running: its innermost Python frame by package and function ("torch
// pin_memory"), else where it was made (library_place).
std::string thread_place(const std::vector<ReportFrame>& all) {
    const auto python = std::find_if(all.begin(), all.end(), python_with_source);
    if (python == all.end() || is_program_frame(*python))
        return library_place(all);
    return library_of(*python) + " " + (python->function.empty() ? std::string("?") : python->function);
}

} // namespace

std::string StackFrames::describe(uint32_t stack_id, bool purpose) {
    const std::vector<ReportFrame>& all = frames(stack_id);
    const std::string kept_for = purpose ? library_purpose(all) : std::string();
    const std::string suffix = kept_for.empty() ? std::string() : " (" + kept_for + ")";
    // A Python program's own line says more than the CUDA call it led to, and more than the library
    // line that made the call for it; a library's line, more than the CUDA call.
    for (const ReportFrame& frame : all)
        if (is_program_frame(frame))
            return python_frame_name(frame) + suffix;
    // A thread a library started (PyTorch's pin-memory thread) runs none of the program's code: the
    // program's line that started it asked for what it makes (the batches of the loop at that line).
    if (const uint32_t start = thread_start_of(stack_id); start != 0) {
        const std::vector<ReportFrame>& started = frames(start);
        const auto program = std::find_if(started.begin(), started.end(), is_program_frame);
        if (program != started.end())
            return fmt::format("{}{} (made there on a library's thread, in {})", python_frame_name(*program),
                               suffix, thread_place(all));
    }
    if (std::none_of(all.begin(), all.end(), python_with_source))
        return library_place(all) + suffix;
    // What such a thread made is handed to the program elsewhere.
    const auto outermost = std::find_if(all.rbegin(), all.rend(), python_with_source);
    const bool library_thread = std::filesystem::path(outermost->file).filename() == "threading.py";
    return library_place(all) + suffix +
           (library_thread ? " (on a library's thread: no frame of the program's own)"
                           : " (no frame of the program's own)");
}

uint32_t StackFrames::thread_start_of(uint32_t stack_id) const {
    const auto start = thread_start_stacks.find(stack_id);
    return start != thread_start_stacks.end() ? start->second : 0;
}

void diagnose_report(ProcessReport& report) {
    report.stacks->thread_start_stacks = report.model.thread_start_stacks;
    mark_framework_allocators(
        report.model, [&](uint32_t stack_id) { return allocator_frames(report.stacks->frames(stack_id)); });
    report.diagnosis = diagnose(report.model);
}

namespace {

// One trace's report: its model, stacks and own diagnosis, without what the run's other processes add.
// Throws TraceError as build_reports does.
ProcessReport process_report(const std::string& path, const std::shared_ptr<ModuleRegistry>& modules,
                             const SymbolizeOptions& options, ModelDetail detail,
                             const std::vector<std::string>& moments) {
    TraceReader trace = TraceReader::open(path);
    ProcessReport report;
    auto symbolized = std::make_unique<SymbolizedStacks>(trace, modules);
    {
        std::optional<DebugInfoReadAhead> reading;
        if (options.read_ahead)
            reading.emplace(*symbolized);
        report.model = build_model(path, trace, detail, moments);
    }
    if (trace.shrank())
        throw TraceError(path, "the file was cut shorter while it was read (by another program?): what it "
                               "held past its new end is lost; report it again once it is whole");
    report.stacks = std::move(symbolized);
    diagnose_report(report);
    if (const std::optional<ProcessTarget>& target = report.model.header.target) {
        ReportFrame& frame = report.target.emplace();
        frame.function = target->qualname;
        frame.file = target->filename;
        frame.line = static_cast<uint32_t>(std::max(target->first_line, 0));
        frame.python = true;
    }
    return report;
}

// A summary's stacks: what the run's tables say of them (the places job_facts, shared_devices and a
// child's start name), described while the whole stacks were at hand; none of their frames.
class DescribedStacks : public StackFrames {
  public:
    DescribedStacks(StackFrames& stacks, const std::vector<uint32_t>& stack_ids) {
        // 0 too: a stack the recorder had no room for, which is described all the same.
        for (const uint32_t stack_id : stack_ids)
            if (!described_.contains(stack_id))
                described_.emplace(stack_id, stacks.describe(stack_id));
    }
    const std::vector<ReportFrame>& frames(uint32_t /*stack_id*/) override {
        throw std::logic_error("a process's summary has no frames: its whole report (ReportSet::whole) has");
    }
    std::string describe(uint32_t stack_id, bool purpose) override {
        const auto found = described_.find(stack_id);
        if (!purpose || found == described_.end())
            throw std::logic_error(fmt::format(
                "a process's summary did not keep stack {} described: its whole report has it", stack_id));
        return found->second;
    }

  private:
    std::map<uint32_t, std::string> described_;
};

// Makes `report` ReportSet's summary: without what only the process's own section shows.
void summarize(ProcessReport& report) {
    // Its memory given back: clear() and `= {}` keep a container's capacity.
    const auto drop = [](auto& held) { held = std::remove_reference_t<decltype(held)>(); };
    ProcessModel& model = report.model;
    std::vector<uint32_t> named;
    for (const ForkRecord& fork : model.forks)
        named.push_back(fork.stack_id);
    for (const DeviceContext& context : model.contexts)
        named.push_back(context.stack_id);
    for (const FailureSummary& failure : model.failures)
        named.push_back(failure.stack_id);
    if (const LeakSite* top = top_site(report))
        named.push_back(top->stack_id);
    for (const int device : devices_used(model))
        if (const LeakSite* oldest = oldest_site_on(model, device))
            named.push_back(oldest->stack_id);
    report.stacks = std::make_unique<DescribedStacks>(*report.stacks, named);
    drop(model.timeline);
    for (DeviceSummary& device : model.devices) {
        drop(device.timeline);
        drop(device.driver_used);
    }
    drop(model.live_allocations);
    drop(model.spilled_allocations);
    drop(model.ring_events);
    drop(model.retainers);
    drop(model.kept_for_backward);
    drop(model.spent_graphs);
    drop(model.site_of_stack);
    for (LeakSite& site : model.leak_sites)
        drop(site.blocks);
}

// Whether two readings of a trace saw the same recording: not the trace of a process that went on
// meanwhile, nor another put in its place.
bool same_recording(const ProcessModel& first, const ProcessModel& second) {
    return first.header.pid == second.header.pid &&
           first.header.start_realtime_ns == second.header.start_realtime_ns &&
           first.events == second.events && first.duration_ns == second.duration_ns &&
           first.header.end.state == second.header.end.state;
}

// Process `process`'s report made whole again, with what the run's other processes added to its summary.
ProcessReport remade(const ProcessReport& summary, ProcessReport report) {
    if (!same_recording(summary.model, report.model))
        report.model.warnings.push_back(fmt::format(
            "the trace changed while the report was written (its process went on?): what is said of this "
            "process alone is of {:.1f} s into its run, the run's tables (ranks, processes, devices) of "
            "{:.1f} s",
            seconds_of(report.model.duration_ns), seconds_of(summary.model.duration_ns)));
    report.model.role = summary.model.role;
    // What diagnose_run found of it among the run's processes.
    report.diagnosis.killed = summary.diagnosis.killed;
    report.diagnosis.run_memory = summary.diagnosis.run_memory;
    report.diagnosis.pressure = summary.diagnosis.pressure;
    report.started_at = summary.started_at;
    report.job = summary.job;
    report.shared_devices = summary.shared_devices;
    return report;
}

} // namespace

ReportSet build_reports(const std::vector<std::string>& trace_paths, const SymbolizeOptions& options,
                        ModelDetail detail, const std::vector<std::string>& moments, size_t kept_whole) {
    const auto modules =
        options.modules ? options.modules
                        : std::make_shared<ModuleRegistry>(options.debuginfo_path, options.cache_directory);
    const bool summarized = trace_paths.size() > kept_whole;
    std::vector<ProcessReport> reports;
    reports.reserve(trace_paths.size());
    for (const std::string& path : trace_paths) {
        ProcessReport& report = reports.emplace_back(process_report(path, modules, options, detail, moments));
        if (summarized)
            summarize(report);
    }
    std::vector<ProcessModel*> models;
    models.reserve(reports.size());
    for (ProcessReport& report : reports)
        models.push_back(&report.model);
    assign_roles(models);
    for (ProcessReport& report : reports) {
        const ProcessRole& role = report.model.role;
        if (role.parent && role.start_stack_id != 0)
            report.started_at = reports[*role.parent].stacks->describe(role.start_stack_id);
    }
    std::vector<const ProcessModel*> modelled(models.begin(), models.end());
    std::vector<Diagnosis*> diagnoses;
    diagnoses.reserve(reports.size());
    for (ProcessReport& report : reports)
        diagnoses.push_back(&report.diagnosis);
    diagnose_run(modelled, diagnoses);
    const PhysicalDevices physical(modelled);
    const std::shared_ptr<const JobFacts> job = job_facts(reports, physical);
    const auto timeline = [&](size_t process, int device) {
        if (!summarized)
            return device_timeline(*modelled[process], device);
        // A summary has none: the trace is read again for it, of a device that processes shared only; of
        // a process that went on meanwhile, up to where the summary ends.
        TraceReader trace = TraceReader::open(trace_paths[process]);
        std::vector<DevicePoint> points =
            device_timeline(build_model(trace_paths[process], trace, ModelDetail::Summary), device);
        std::erase_if(
            points, [&](const DevicePoint& point) { return point.time_ns > modelled[process]->duration_ns; });
        return points;
    };
    const std::shared_ptr<const std::vector<SharedDevice>> shared = shared_devices(
        modelled, physical,
        [&](size_t process, const DeviceContext& context) {
            return context.stack_id != 0 ? reports[process].stacks->describe(context.stack_id)
                                         : std::string();
        },
        timeline);
    for (ProcessReport& report : reports) {
        report.job = job;
        report.shared_devices = shared;
    }
    if (!summarized)
        return ReportSet(std::move(reports));
    return ReportSet(std::move(reports), [=](size_t process, const ProcessReport& summary) {
        return remade(summary, process_report(trace_paths[process], modules, options, detail, moments));
    });
}

} // namespace gpuleak::analyzer
