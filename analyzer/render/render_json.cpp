#include "render_json.h"

#include "diagnosis_text.h"
#include "stack_view.h"

namespace gpuleak::analyzer {

using nlohmann::json;

namespace {

json optional_json(const std::optional<uint64_t>& value) {
    return value ? json(*value) : json();
}

json ended_json(const ProcessEnd& end) {
    switch (end.state) {
    case format::EndState::Exited:
        return {{"how", "exit"}, {"code", end.exit_code}, {"signal", nullptr}};
    case format::EndState::Signaled:
        return {{"how", "signal"}, {"code", nullptr}, {"signal", end.signal}};
    case format::EndState::Exec:
        return {{"how", "exec"}, {"code", nullptr}, {"signal", nullptr}};
    case format::EndState::Running:
        break;
    }
    return {{"how", "killed"}, {"code", nullptr}, {"signal", nullptr}};
}

// The frames the text shows.
json frames_json(StackFrames& stacks, uint32_t stack_id, const ReportOptions& options) {
    json frames = json::array();
    for (const ReportFrame* shown : shown_frames(stacks.frames(stack_id), options)) {
        const ReportFrame& frame = *shown;
        json entry = {{"function", frame.function},
                      {"file", frame.file},
                      {"line", frame.line},
                      {"module", frame.module},
                      {"module_offset", frame.module_offset},
                      {"inlined", frame.inlined},
                      {"python", frame.python}};
        if (frame.python)
            entry["program"] = is_program_frame(frame);
        if (!frame.source_name.empty()) {
            entry["source_name"] = frame.source_name;
            entry["source_line"] = frame.source_line;
        }
        frames.push_back(std::move(entry));
    }
    return frames;
}

uint64_t sum(const std::vector<DeviceSummary>& devices, uint64_t DeviceSummary::*field) {
    uint64_t total = 0;
    for (const DeviceSummary& device : devices)
        total += device.*field;
    return total;
}

json process_json(ProcessReport& report, const ReportOptions& options) {
    const ProcessModel& model = report.model;
    json devices = json::array();
    for (const DeviceSummary& device : model.devices)
        devices.push_back({{"device", device.device},
                           {"peak_reserved_bytes", device.peak_reserved},
                           {"final_reserved_bytes", device.final_reserved},
                           {"peak_allocated_bytes", device.peak_allocated},
                           {"final_allocated_bytes", device.final_allocated},
                           {"capacity_bytes", optional_json(device.capacity)},
                           {"lowest_free_bytes", optional_json(device.lowest_free)},
                           {"peak_driver_used_bytes", optional_json(device.peak_used_by_driver)}});
    json leaks = json::array();
    for (const LeakSite& site : model.leak_sites) {
        if (leaks.size() >= options.top || site.bytes < options.min_bytes)
            break;
        json entry = {{"bytes", site.bytes},
                      {"count", site.count},
                      {"spilled", site.spilled},
                      {"kind", format::kind_name(site.kind)},
                      {"first_s", seconds_of(site.first_ns)},
                      {"last_s", seconds_of(site.last_ns)},
                      {"where", report.stacks->describe(site.stack_id)},
                      {"growing", site.growing},
                      {"segments", site.segments},
                      {"program_share", site.program_share},
                      {"bytes_per_second", site.bytes_per_second},
                      {"frames", frames_json(*report.stacks, site.stack_id, options)}};
        if (site.marker_range) {
            auto label = [&](int index) -> json {
                return index < 0 ? json(nullptr) : json(model.markers[index].label);
            };
            entry["first_marker"] = label(site.marker_range->first);
            entry["last_marker"] = label(site.marker_range->second);
        }
        leaks.push_back(std::move(entry));
    }
    json growth = json::array();
    for (size_t index : model.growth_sites) {
        if (growth.size() >= options.top)
            break;
        const LeakSite& site = model.leak_sites[index];
        growth.push_back({{"bytes", site.bytes},
                          {"count", site.count},
                          {"kind", format::kind_name(site.kind)},
                          {"where", report.stacks->describe(site.stack_id)},
                          {"program_share", site.program_share},
                          {"bytes_per_second", site.bytes_per_second},
                          {"bytes_per_marker_interval", site.bytes_per_marker_interval},
                          {"frames", frames_json(*report.stacks, site.stack_id, options)}});
    }
    json failures = json::array();
    for (const FailureSummary& failure : model.failures) {
        if (failures.size() >= options.top)
            break;
        json top_sites = json::array();
        for (const LiveSiteAt& site : failure.top_sites_then)
            top_sites.push_back({{"bytes", site.bytes},
                                 {"count", site.count},
                                 {"frames", frames_json(*report.stacks, site.stack_id, options)}});
        failures.push_back({{"bytes", failure.bytes},
                            {"error", failure.error},
                            {"source", failure.allocator_refused ? "allocator" : "cuda"},
                            {"failed_cuda_allocations", failure.failed_cuda_allocations},
                            {"device", failure.device},
                            {"kind", format::kind_name(failure.kind)},
                            {"free_bytes", optional_json(failure.free_bytes)},
                            {"reserved_bytes_then", optional_json(failure.reserved_then)},
                            {"t_s", seconds_of(failure.time_ns)},
                            {"frames", frames_json(*report.stacks, failure.stack_id, options)},
                            {"top_sites_then", std::move(top_sites)}});
    }
    json timeline = json::array();
    for (const TimelinePoint& point : model.timeline)
        timeline.push_back({{"t_s", seconds_of(point.time_ns)},
                            {"reserved_bytes", point.reserved},
                            {"allocated_bytes", point.allocated},
                            {"device_used_bytes", nullptr},
                            {"rss_bytes", optional_json(point.rss)}});
    json markers = json::array();
    for (const Marker& marker : model.markers)
        markers.push_back({{"t_s", seconds_of(marker.time_ns)}, {"label", marker.label}});

    json process = {{"trace", model.path},
                    {"pid", model.header.pid},
                    {"ppid", model.header.ppid},
                    {"command", model.header.command_line},
                    {"ended", ended_json(model.header.end)},
                    {"simulated", model.header.simulated_device()},
                    {"duration_s", seconds_of(model.duration_ns)},
                    {"summary",
                     {{"peak_reserved_bytes", sum(model.devices, &DeviceSummary::peak_reserved)},
                      {"final_reserved_bytes", sum(model.devices, &DeviceSummary::final_reserved)},
                      {"peak_allocated_bytes", sum(model.devices, &DeviceSummary::peak_allocated)},
                      {"final_allocated_bytes", sum(model.devices, &DeviceSummary::final_allocated)},
                      {"peak_pinned_host_bytes", model.peak_pinned_host},
                      {"peak_managed_bytes", model.peak_managed},
                      {"events", model.events},
                      {"events_overwritten", model.events_overwritten},
                      {"failed_allocations", model.failed_allocations},
                      {"allocator_reports_blocks", model.reports_blocks},
                      {"devices", std::move(devices)},
                      {"exactness",
                       {{"untracked", model.exactness.untracked},
                        {"spilled", model.exactness.spilled().count},
                        {"spilled_bytes", model.exactness.spilled().bytes},
                        {"unattributed", model.exactness.unattributed().count},
                        {"unattributed_bytes", model.exactness.unattributed().bytes},
                        {"live_capacity", model.exactness.live_capacity},
                        {"stacks_dropped", model.exactness.stacks_dropped},
                        {"notable_dropped", model.exactness.notable_dropped},
                        {"notes", exactness_notes(model)}}}}},
                    {"diagnosis",
                     {{"kind", diagnosis_kind_name(report.diagnosis.kind)},
                      {"text", diagnosis_text(report.model, report.diagnosis, *report.stacks)}}},
                    {"leaks", std::move(leaks)},
                    {"growth", std::move(growth)},
                    {"failures", std::move(failures)},
                    {"timeline", std::move(timeline)},
                    {"markers", std::move(markers)},
                    {"warnings", model.warnings}};
    if (model.code_end_ns)
        process["python_finalizing_s"] = seconds_of(*model.code_end_ns);
    return process;
}

} // namespace

json render_json(std::vector<ProcessReport>& reports, const ReportOptions& options) {
    json processes = json::array();
    for (ProcessReport& report : reports)
        processes.push_back(process_json(report, options));
    return {{"schema", "gpuleak-report/1"}, {"processes", std::move(processes)}};
}

} // namespace gpuleak::analyzer
