#include "render/render_json.h"

#include "common/name_table.h"
#include "model/timeline_thinning.h"
#include "python/program_files.h"
#include "render/cuda_errors.h"
#include "render/diagnosis_text.h"
#include "report/job_facts.h"
#include "report/shared_devices.h"
#include "report/stack_view.h"

namespace gpuleak::analyzer {

using nlohmann::json;

namespace {

json optional_json(const std::optional<uint64_t>& value) {
    return value ? json(*value) : json();
}

const char* sender_kind_name(format::SenderKind kind) {
    static constexpr NameTable kNames({{format::SenderKind::Unknown, "unknown"},
                                       {format::SenderKind::Kernel, "kernel"},
                                       {format::SenderKind::Itself, "itself"},
                                       {format::SenderKind::Process, "process"},
                                       {format::SenderKind::OomKiller, "oom_killer"},
                                       {format::SenderKind::Notebook, "notebook"}},
                                      format::SenderKind::Unknown);
    return kNames[kind];
}

json sender_json(const ProcessModel& model) {
    const SignalSender& sender = model.header.end.sender;
    const bool by_process = sender.kind == format::SenderKind::Process ||
                            sender.kind == format::SenderKind::Itself ||
                            sender.kind == format::SenderKind::Notebook;
    return {{"kind", sender_kind_name(sender.kind)},
            {"pid", by_process ? json(sender.pid) : json()},
            {"uid", by_process ? json(sender.uid) : json()},
            {"name", by_process && !sender.name.empty() ? json(sender.name) : json()},
            {"parent", by_process && sender.pid == model.header.ppid},
            {"signal_code", sender.signal_code},
            {"written_by", sender.written_by_launcher ? "launcher" : "process"}};
}

json ended_json(const ProcessModel& model) {
    const ProcessEnd& end = model.header.end;
    return {{"how", ended_how(model)},
            {"code", end.state == format::EndState::Exited ? json(end.exit_code) : json()},
            {"signal", end.state == format::EndState::Signaled ? json(end.signal) : json()},
            {"sender", end.state == format::EndState::Signaled ? sender_json(model) : json()},
            {"text", ended_text(model)}};
}

json error_json(const ProcessModel& model, const ProgramError& error) {
    json frames = json::array();
    for (const ProgramError::Frame& frame : error.frames) {
        json entry = {{"file", frame.file},
                      {"line", frame.line},
                      {"function", frame.function},
                      {"program", is_program_file(frame.file)}};
        if (!frame.source_name.empty())
            entry["source_name"] = frame.source_name;
        frames.push_back(std::move(entry));
    }
    json entry = {{"type", error.type},
                  {"message", error.message},
                  {"t_s", seconds_of(error.time_ns)},
                  {"frames", std::move(frames)},
                  {"program_frame", optional_json(error.program_frame)},
                  {"failure", optional_json(error.failure)},
                  {"text", program_error_text(model, error)}};
    if (!error.cell.empty())
        entry["cell"] = error.cell;
    return entry;
}

json cell_errors_json(const ProcessModel& model) {
    json errors = json::array();
    for (const ProgramError& error : model.cell_errors)
        errors.push_back(error_json(model, error));
    return errors;
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
        if (!frame.source_name.empty())
            entry["source_name"] = frame.source_name;
        if (is_program_frame(frame))
            entry["source_line"] = frame.source_line;
        frames.push_back(std::move(entry));
    }
    return frames;
}

// The frames of the stack that started the thread `stack_id` was made on; null when none was recorded.
json thread_start_json(StackFrames& stacks, uint32_t stack_id, const ReportOptions& options) {
    const uint32_t start = stacks.thread_start_of(stack_id);
    return start != 0 ? frames_json(stacks, start, options) : json();
}

// An index into an array the JSON has cut to `shown` entries (--top, --min-bytes): null past them.
json shown_index(const std::optional<size_t>& index, size_t shown) {
    return index && *index < shown ? json(*index) : json();
}

// `leaks` and `failures`: how many entries of each the JSON has.
json retainers_json(const RetainerSnapshot& snapshot, StackFrames& stacks, size_t leaks, size_t failures) {
    const auto shares_json = [&](const std::vector<SiteShare>& shares) {
        json sites = json::array();
        for (const SiteShare& share : shares) {
            const RetainedSite& site = snapshot.sites[share.site];
            sites.push_back({{"bytes", share.bytes},
                             {"kind", format::kind_name(site.kind)},
                             {"where", stacks.describe(site.stack_id)},
                             {"leak", shown_index(site.leak_site, leaks)}});
            if (!share.path.empty())
                sites.back()["path"] = share.path;
        }
        return sites;
    };
    json holders = json::array();
    for (const Retainer& holder : snapshot.holders) {
        json graph = nullptr;
        if (holder.graph)
            graph = {{"path", holder.graph->path},
                     {"nodes", holder.graph->nodes},
                     {"passes", holder.graph->passes},
                     {"spent_passes", holder.graph->spent_passes},
                     {"spent_by_one", holder.graph->spent_by_one}};
        holders.push_back({{"root", holder.root},
                           {"kind", holder.kind},
                           {"bytes", holder.bytes},
                           {"tensors", holder.tensors},
                           {"path", holder.path},
                           {"through", holder.through},
                           {"own", holder.own},
                           {"owner", holder.owner},
                           {"models", holder.models},
                           {"advice", holder.advice},
                           {"graph", std::move(graph)},
                           {"sites", shares_json(holder.sites)}});
    }
    return {{"t_s", seconds_of(snapshot.time_ns)},
            {"label", snapshot.label},
            {"moment", retainer_moment_name(snapshot.moment)},
            {"device", snapshot.device ? json(*snapshot.device) : json()},
            {"failure", shown_index(snapshot.failure, failures)},
            {"seconds", snapshot.seconds},
            {"objects_searched", snapshot.objects},
            {"stopped", snapshot.stopped},
            {"problem", snapshot.problem.empty() ? json() : json(snapshot.problem)},
            {"saved_tensors_read", snapshot.saved_tensors_read},
            {"holders", std::move(holders)},
            {"unreached", shares_json(snapshot.unreached)}};
}

json held_by_json(const ProcessModel& model, const LeakSite& site) {
    json held = json::array();
    for (const HeldBy& by : site.held_by)
        held.push_back({{"root", model.retainers[by.snapshot].holders[by.holder].root},
                        {"bytes", by.bytes},
                        {"path", model.retainers[by.snapshot].holders[by.holder].sites[by.share].path},
                        {"retainers", by.snapshot}});
    return held;
}

json present_json(const HostPoint& point, format::HostField field, uint64_t value) {
    return point.has(field) ? json(value) : json();
}

json host_point_json(const HostPoint& point) {
    using format::HostField;
    const format::HostSample& sample = point.sample;
    return {{"t_s", seconds_of(point.time_ns)},
            {"rss_bytes", point.rss},
            {"uss_bytes", present_json(point, HostField::Proportional, sample.uss)},
            {"pss_bytes", present_json(point, HostField::Proportional, sample.pss)},
            {"anon_bytes", present_json(point, HostField::Status, sample.rss_anon)},
            {"file_bytes", present_json(point, HostField::Status, sample.rss_file)},
            {"shmem_bytes", present_json(point, HostField::Status, sample.rss_shmem)},
            {"swap_bytes", present_json(point, HostField::Status, sample.swap)},
            {"cgroup_bytes", present_json(point, HostField::Cgroup, sample.cgroup_bytes)},
            {"cgroup_limit_bytes", present_json(point, HostField::CgroupLimit, sample.cgroup_limit_bytes)},
            {"available_bytes", present_json(point, HostField::Available, sample.available_bytes)},
            {"heap_free_bytes", present_json(point, HostField::HeapFree, sample.heap_free)},
            {"python_modules", point.python_modules > 0 ? json(point.python_modules) : json()},
            {"simulated_device_bytes", point.simulated_device_bytes}};
}

json host_json(const ProcessModel& model) {
    const HostMemory& host = model.host;
    json timeline = json::array();
    for (const HostPoint& point : host.points)
        timeline.push_back(host_point_json(point));
    return {{"peak_rss_bytes", host.points.empty() ? json() : json(host.peak_rss)},
            {"peak_uss_bytes", optional_json(host.peak_uss)},
            {"peak_pss_bytes", optional_json(host.peak_pss)},
            {"peak_shmem_bytes", optional_json(host.peak_shmem)},
            {"peak_swap_bytes", optional_json(host.peak_swap)},
            {"cgroup_limit_bytes", optional_json(host.cgroup_limit)},
            {"peak_cgroup_bytes", optional_json(host.peak_cgroup)},
            {"lowest_available_bytes", optional_json(host.lowest_available)},
            {"machine_bytes",
             model.header.host_memory_bytes != 0 ? json(model.header.host_memory_bytes) : json()},
            {"timeline", std::move(timeline)}};
}

json role_json(const ProcessRole& role) {
    const char* start_method = start_method_name(role.start_method);
    return {{"kind", role_kind_name(role.kind)},
            {"worker_id", role.worker_id ? json(*role.worker_id) : json()},
            {"start_method", start_method == nullptr ? json() : json(start_method)},
            {"rank", role.rank >= 0 ? json(role.rank) : json()},
            {"local_rank", role.local_rank >= 0 ? json(role.local_rank) : json()},
            {"world_size", role.world_size >= 0 ? json(role.world_size) : json()},
            {"node_rank", role.node_rank >= 0 ? json(role.node_rank) : json()},
            {"text", role_text(role)}};
}

json pool_json(const Diagnosis& diagnosis) {
    if (!diagnosis.pool)
        return nullptr;
    const PoolFacts& pool = *diagnosis.pool;
    return {{"framework", pool_owner_name(pool.owner)},
            {"device", pool.device},
            {"bytes", pool.bytes},
            {"capacity_bytes", optional_json(pool.capacity)},
            {"regions", pool.regions},
            {"first_s", seconds_of(pool.first_ns)},
            {"last_s", seconds_of(pool.last_ns)},
            {"grew_through_work", pool.grew_through_work}};
}

json allocator_json(const Diagnosis& diagnosis) {
    if (!diagnosis.allocator)
        return nullptr;
    const AllocatorFacts& allocator = *diagnosis.allocator;
    return {{"framework", pool_owner_name(allocator.framework)},
            {"mode", allocator_mode_name(allocator.mode)},
            {"xla", allocator.xla}};
}

json host_diagnosis_json(const ProcessModel& model, const Diagnosis& diagnosis) {
    if (!diagnosis.host_ram)
        return nullptr;
    const HostRamFacts& host = *diagnosis.host_ram;
    return {{"cause", host_growth_cause_name(host.cause)},
            {"growth_bytes", host.growth},
            {"while_importing_bytes", host.while_importing},
            {"from", host_point_json(host.from)},
            {"to", host_point_json(host.to)},
            {"text", host_growth_text(model, host)}};
}

json killed_json(const ProcessModel& model, const Diagnosis& diagnosis) {
    if (!diagnosis.killed)
        return nullptr;
    const KilledFacts& killed = *diagnosis.killed;
    return {{"last", host_point_json(killed.last)},
            {"largest_pid", killed.largest_pid},
            {"largest_rss_bytes", killed.largest_rss},
            {"largest_role", role_json(killed.largest_role)},
            {"text", killed_text(model, killed)}};
}

json pressure_json(const Diagnosis& diagnosis) {
    if (!diagnosis.pressure)
        return nullptr;
    const MemoryPressureFacts& pressure = *diagnosis.pressure;
    return {{"t_s", seconds_of(pressure.time_ns)}, {"of", pressure.cgroup ? "cgroup" : "machine"},
            {"used_bytes", pressure.used},         {"limit_bytes", pressure.limit},
            {"rss_bytes", pressure.rss},           {"text", pressure_text(pressure)}};
}

uint64_t sum(const std::vector<DeviceSummary>& devices, uint64_t DeviceSummary::*field) {
    uint64_t total = 0;
    for (const DeviceSummary& device : devices)
        total += device.*field;
    return total;
}

} // namespace

json process_json(ProcessReport& report, const ReportOptions& options) {
    const ProcessModel& model = report.model;
    json devices = json::array();
    for (const DeviceSummary& device : model.devices) {
        json timeline = json::array();
        for (const DevicePoint& point : device.timeline)
            timeline.push_back({{"t_s", seconds_of(point.time_ns)},
                                {"reserved_bytes", point.reserved},
                                {"allocated_bytes", point.allocated}});
        json driver_used = json::array();
        for (const DriverUsedPoint& point : device.driver_used)
            driver_used.push_back({{"t_s", seconds_of(point.time_ns)}, {"bytes", point.bytes}});
        devices.push_back({{"device", device.device},
                           {"peak_reserved_bytes", device.peak_reserved},
                           {"final_reserved_bytes", device.final_reserved},
                           {"peak_allocated_bytes", device.peak_allocated},
                           {"final_allocated_bytes", device.final_allocated},
                           {"capacity_bytes", optional_json(device.capacity)},
                           {"lowest_free_bytes", optional_json(device.lowest_free)},
                           {"peak_driver_used_bytes", optional_json(device.peak_used_by_driver)},
                           {"timeline", std::move(timeline)},
                           {"driver_used", std::move(driver_used)}});
    }
    json leaks = json::array();
    for (const LeakSite& site : model.leak_sites) {
        if (leaks.size() >= options.top || site.bytes < options.min_bytes)
            break;
        json entry = {{"bytes", site.bytes},
                      {"count", site.count},
                      {"spilled", site.spilled},
                      {"freed_at_exit_bytes", site.freed_at_exit},
                      {"kind", format::kind_name(site.kind)},
                      {"stack_id", site.stack_id},
                      {"first_s", seconds_of(site.first_ns)},
                      {"last_s", seconds_of(site.last_ns)},
                      {"where", site_place(site, *report.stacks)},
                      {"purpose", site_purpose(site, *report.stacks)},
                      {"growing", site.growing},
                      {"segments", site.segments},
                      {"before_attach", site.before_attach},
                      {"program_share", site.program_share},
                      {"bytes_per_second", site.bytes_per_second},
                      {"held_by", held_by_json(model, site)},
                      {"frames", frames_json(*report.stacks, site.stack_id, options)},
                      {"thread_started_at", thread_start_json(*report.stacks, site.stack_id, options)}};
        if (site.marker_range) {
            auto label = [&](int index) -> json {
                return index < 0 ? json(nullptr) : json(model.markers[index].label);
            };
            entry["first_marker"] = label(site.marker_range->first);
            entry["last_marker"] = label(site.marker_range->second);
        }
        if (options.live_blocks) {
            json blocks = json::array();
            for (const LiveBlock& block : site.blocks)
                blocks.push_back({block.address, block.size});
            entry["blocks"] = std::move(blocks);
        }
        leaks.push_back(std::move(entry));
    }
    // A leak's site, as the lists of each cause show it: what it holds at the end, where it was made.
    const auto leak_site_json = [&](size_t index) -> json {
        const LeakSite& site = model.leak_sites[index];
        return {{"bytes", site.bytes},
                {"count", site.count},
                {"kind", format::kind_name(site.kind)},
                {"where", report.stacks->describe(site.stack_id)},
                {"frames", frames_json(*report.stacks, site.stack_id, options)},
                {"thread_started_at", thread_start_json(*report.stacks, site.stack_id, options)}};
    };
    json growth = json::array();
    for (size_t index : model.growth_sites) {
        if (growth.size() >= options.top)
            break;
        const LeakSite& site = model.leak_sites[index];
        json entry = leak_site_json(index);
        entry["program_share"] = site.program_share;
        entry["bytes_per_second"] = site.bytes_per_second;
        entry["bytes_per_marker_interval"] = site.bytes_per_marker_interval;
        entry["freed_at_exit_bytes"] = site.freed_at_exit;
        growth.push_back(std::move(entry));
    }
    json kept_for_backward = json::array();
    for (const KeptForBackward& kept : model.kept_for_backward) {
        if (kept_for_backward.size() >= options.top)
            break;
        json entry = leak_site_json(kept.site);
        entry["held_bytes"] = kept.bytes;
        entry["held_by"] = model.retainers[kept.snapshot].holders[kept.holder].root;
        kept_for_backward.push_back(std::move(entry));
    }
    json spent_graphs = json::array();
    for (const SpentGraph& spent : model.spent_graphs) {
        if (spent_graphs.size() >= options.top)
            break;
        const Retainer& holder = model.retainers[spent.snapshot].holders[spent.holder];
        json entry = leak_site_json(spent.site);
        entry["held_by"] = holder.root;
        entry["path"] = holder.graph->path;
        entry["spent_passes"] = holder.graph->spent_passes;
        entry["nodes"] = holder.graph->nodes;
        spent_graphs.push_back(std::move(entry));
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
        const std::string meaning = cuda_error_meaning(failure.error);
        failures.push_back(
            {{"bytes", failure.bytes},
             {"error", failure.error},
             {"out_of_memory", failure.out_of_memory()},
             {"error_meaning", meaning.empty() ? json() : json(meaning)},
             {"source", failure.allocator_refused ? "allocator" : "cuda"},
             {"failed_cuda_allocations", failure.failed_cuda_allocations},
             {"device", failure.device},
             {"kind", format::kind_name(failure.kind)},
             {"free_bytes", optional_json(failure.free_bytes)},
             {"reserved_bytes_then", optional_json(failure.reserved_then)},
             {"t_s", seconds_of(failure.time_ns)},
             {"frames", frames_json(*report.stacks, failure.stack_id, options)},
             {"thread_started_at", thread_start_json(*report.stacks, failure.stack_id, options)},
             {"top_sites_then", std::move(top_sites)},
             {"retainers", optional_json(failure.retainers)}});
    }
    json timeline = json::array();
    for (const TimelinePoint& point : model.timeline)
        timeline.push_back({{"t_s", seconds_of(point.time_ns)},
                            {"reserved_bytes", point.reserved},
                            {"allocated_bytes", point.allocated},
                            {"device_used_bytes", optional_json(point.driver_used)},
                            {"rss_bytes", optional_json(point.rss)}});
    json retainers = json::array();
    for (const RetainerSnapshot& snapshot : model.retainers)
        retainers.push_back(retainers_json(snapshot, *report.stacks, leaks.size(), failures.size()));
    json contexts = json::array();
    for (const DeviceContext& context : model.contexts)
        contexts.push_back(
            {{"device", context.device},
             {"uuid", context.uuid.empty() ? json() : json(context.uuid)},
             {"t_s", seconds_of(context.time_ns)},
             {"where", context.stack_id != 0 ? json(report.stacks->describe(context.stack_id)) : json()}});
    json markers = json::array();
    for (const Marker& marker : model.markers)
        markers.push_back({{"t_s", seconds_of(marker.time_ns)}, {"label", marker.label}});

    json process = {{"trace", model.path},
                    {"pid", model.header.pid},
                    {"ppid", model.header.ppid},
                    {"hostname", model.header.hostname},
                    {"job", model.header.job.empty() ? json() : json(model.header.job)},
                    {"started_unix_s", static_cast<double>(model.header.start_realtime_ns) / 1e9},
                    {"command", model.header.command_line},
                    {"role", role_json(model.role)},
                    {"started_at", report.started_at.empty() ? json() : json(report.started_at)},
                    {"target", report.target ? json{{"function", report.target->function},
                                                    {"file", report.target->file},
                                                    {"line", report.target->line},
                                                    {"program", is_program_frame(*report.target)}}
                                             : json()},
                    {"host_only", model.header.host_only()},
                    {"attached", model.header.attached()},
                    {"ended", ended_json(model)},
                    {"error", model.error ? error_json(model, *model.error) : json()},
                    {"cell_errors", cell_errors_json(model)},
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
                        {"strings_dropped", model.exactness.strings_dropped},
                        {"notable_dropped", model.exactness.notable_dropped},
                        {"reentry_dropped", model.exactness.reentry_dropped},
                        {"reentry_dropped_notes", model.exactness.reentry_dropped_notes},
                        {"notes", exactness_notes(model)}}}}},
                    {"contexts", std::move(contexts)},
                    {"diagnosis",
                     {{"kind", diagnosis_kind_name(report.diagnosis.kind)},
                      {"leak_cause",
                       report.diagnosis.leak ? json(leak_cause_name(report.diagnosis.leak->cause)) : json()},
                      {"text", diagnosis_text(report.model, report.diagnosis, *report.stacks)},
                      {"host", host_diagnosis_json(report.model, report.diagnosis)},
                      {"killed", killed_json(report.model, report.diagnosis)},
                      {"pressure", pressure_json(report.diagnosis)},
                      {"framework_pool", pool_json(report.diagnosis)},
                      {"framework_allocator", allocator_json(report.diagnosis)}}},
                    {"host", host_json(model)},
                    {"leaks", std::move(leaks)},
                    {"growth", std::move(growth)},
                    {"spent_graphs", std::move(spent_graphs)},
                    {"kept_for_backward", std::move(kept_for_backward)},
                    {"failures", std::move(failures)},
                    {"retainers", std::move(retainers)},
                    {"timeline", std::move(timeline)},
                    {"markers", std::move(markers)},
                    {"warnings", model.warnings}};
    if (model.code_end_ns)
        process["python_finalizing_s"] = seconds_of(*model.code_end_ns);
    return process;
}

namespace {

json state_json(const MemoryState& state, uint64_t bytes) {
    const ProcessModel& model = state.report->model;
    return {{"trace", model.path},
            {"pid", model.header.pid},
            {"command_line", model.header.command_line},
            {"marker", state.marker_ns ? json(state.label) : json()},
            {"t_s", state.marker_ns ? json(seconds_of(*state.marker_ns)) : json()},
            {"bytes", bytes}};
}

json held_json(const std::optional<LiveSiteAt>& site) {
    return site ? json{{"bytes", site->bytes}, {"count", site->count}} : json{{"bytes", 0}, {"count", 0}};
}

} // namespace

json render_changes_json(Comparison& comparison, const ReportOptions& options) {
    json changes = json::array();
    for (const SiteChange* listed : shown_changes(comparison, options)) {
        const SiteChange& change = *listed;
        const MemoryState& shown = change.after ? comparison.after : comparison.before;
        const uint32_t stack_id = change.after ? change.after->stack_id : change.before->stack_id;
        changes.push_back(
            {{"change_bytes", change.change()},
             {"kind", format::kind_name(change.kind)},
             {"before", held_json(change.before)},
             {"after", held_json(change.after)},
             {"frames", frames_json(*shown.report->stacks, stack_id, options)},
             {"thread_started_at", thread_start_json(*shown.report->stacks, stack_id, options)}});
    }
    return {{"schema", "gpuleak-changes/1"},
            {"before", state_json(comparison.before, comparison.before_bytes)},
            {"after", state_json(comparison.after, comparison.after_bytes)},
            {"change_bytes",
             static_cast<int64_t>(comparison.after_bytes) - static_cast<int64_t>(comparison.before_bytes)},
            {"sites_changed", comparison.changes.size()},
            {"changes", std::move(changes)}};
}

namespace {

json job_json(const JobFacts& job, const EndedText& ended) {
    json ranks = json::array();
    for (const RankRow& row : job.ranks)
        ranks.push_back({{"rank", row.rank},
                         {"pid", row.pid},
                         {"hostname", row.host},
                         {"local_rank", row.local_rank >= 0 ? json(row.local_rank) : json()},
                         {"node_rank", row.node_rank >= 0 ? json(row.node_rank) : json()},
                         {"devices", row.devices},
                         {"peak_reserved_bytes", row.peak_reserved},
                         {"final_reserved_bytes", row.final_reserved},
                         {"peak_allocated_bytes", row.peak_allocated},
                         {"final_allocated_bytes", row.final_allocated},
                         {"diagnosis", diagnosis_kind_name(row.verdict)},
                         {"leaked_bytes", row.leaked},
                         {"top_site", row.top_site.empty() ? json() : json(row.top_site)},
                         {"top_site_bytes", row.top_site_bytes}});
    json apart = json::array();
    for (const ApartRank& rank : job.apart)
        apart.push_back({{"rank", job.ranks[rank.index].rank},
                         {"by", rank.by == ApartBy::Peak ? "peak" : "growth"},
                         {"bytes", rank.by == ApartBy::Peak ? job.ranks[rank.index].peak_reserved
                                                            : job.ranks[rank.index].leaked},
                         {"peers_median_bytes", rank.peers_median}});
    json intruding = json::array();
    for (const IntrudingRank& intruder : job.intruding)
        intruding.push_back(
            {{"rank", job.ranks[intruder.index].rank},
             {"device", intruder.device},
             {"owner", intruder.owner},
             {"context", intruder.context},
             {"peak_reserved_bytes", intruder.peak_reserved},
             {"first_site", intruder.first_site.empty() ? json() : json(intruder.first_site)}});
    json failed = json::array();
    for (const FailedRank& rank : job.failed)
        failed.push_back({{"rank", job.ranks[rank.index].rank},
                          {"out_of_memory", rank.out_of_memory},
                          {"asked_bytes", rank.out_of_memory ? json(rank.asked_bytes) : json()},
                          {"device", rank.out_of_memory ? json(rank.device) : json()},
                          {"reserved_bytes", rank.out_of_memory ? optional_json(rank.reserved_then) : json()},
                          {"failure_site", rank.failure_site.empty() ? json() : json(rank.failure_site)},
                          {"killed", rank.killed},
                          {"ended", ended(job.ranks[rank.index])},
                          {"ended_unix_s", static_cast<double>(rank.ended_realtime_ns) / 1e9}});
    json shared = json::array();
    for (const SharedLeak& leak : job.shared_leaks)
        shared.push_back({{"site", leak.site}, {"ranks", leak.ranks}, {"bytes", leak.bytes}});
    return {{"id", job.id.empty() ? json() : json(job.id)},
            {"world_size", job.world_size > 0 ? json(job.world_size) : json()},
            {"ranks", std::move(ranks)},
            {"apart", std::move(apart)},
            {"intruding", std::move(intruding)},
            {"failed", std::move(failed)},
            {"shared_leaks", std::move(shared)}};
}

json shared_devices_json(const std::vector<SharedDevice>& devices) {
    json all = json::array();
    for (const SharedDevice& device : devices) {
        json users = json::array();
        for (const DeviceUser& user : device.users)
            users.push_back({{"pid", user.pid},
                             {"device", user.device},
                             {"peak_reserved_bytes", user.peak_reserved},
                             {"final_reserved_bytes", user.final_reserved},
                             {"context", user.context},
                             {"context_site", user.context_site.empty() ? json() : json(user.context_site)}});
        all.push_back({{"hostname", device.host},
                       {"device", device.device},
                       {"uuid", device.uuid.empty() ? json() : json(device.uuid)},
                       {"peak_reserved_bytes", device.peak_reserved},
                       {"contexts", device.contexts},
                       {"capacity_bytes", optional_json(device.capacity)},
                       {"processes", std::move(users)}});
    }
    return all;
}

} // namespace

json render_json(ReportSet& reports, const ReportOptions& options) {
    json document = run_json(reports);
    for (size_t i = 0; i < reports.size(); ++i)
        document["processes"].push_back(process_json(reports.whole(i), options));
    return document;
}

json run_json(ReportSet& set) {
    std::vector<ProcessReport>& reports = set.all();
    json memory_peak;
    if (!reports.empty() && reports.front().diagnosis.run_memory) {
        const RunMemoryFacts& peak = *reports.front().diagnosis.run_memory;
        memory_peak = {{"t_s", seconds_of(peak.run_time_ns)},
                       {"cgroup", peak.cgroup},
                       {"used_bytes", peak.used},
                       {"limit_bytes", peak.limit},
                       {"largest_pid", peak.largest_pid},
                       {"largest_rss_bytes", peak.largest_rss}};
    }
    return {{"schema", "gpuleak-report/1"},
            {"run",
             {{"memory_peak", std::move(memory_peak)},
              {"shared_devices", reports.empty() || !reports.front().shared_devices
                                     ? json::array()
                                     : shared_devices_json(*reports.front().shared_devices)}}},
            {"job", reports.empty() || !reports.front().job
                        ? json()
                        : job_json(*reports.front().job, ended_texts(reports))},
            {"processes", json::array()}};
}

json render_job_json(ReportSet& set, const ReportOptions& options) {
    std::vector<ProcessReport>& reports = set.all();
    if (reports.empty() || !reports.front().job)
        return json();
    // Each device's timeline in this many stretches: what the devices that processes of other machines'
    // reports shared sum up to at once, in few KB.
    constexpr size_t kJobStretches = 100;
    json processes = json::array();
    for (size_t process_index = 0; process_index < reports.size(); ++process_index) {
        ProcessReport& report = set.whole(process_index);
        json process = process_json(report, options);
        for (auto key = process.begin(); key != process.end();)
            key = merge_reads(1, key.key(), key.key()) ? std::next(key) : process.erase(key);
        for (const char* top : {"summary", "diagnosis", "ended"})
            for (auto key = process[top].begin(); key != process[top].end();)
                key = merge_reads(2, top, key.key()) ? std::next(key) : process[top].erase(key);
        json& devices = process["summary"]["devices"];
        for (size_t i = 0; i < devices.size(); ++i) {
            for (auto key = devices[i].begin(); key != devices[i].end();)
                key = merge_reads(4, "summary", key.key()) ? std::next(key) : devices[i].erase(key);
            DeviceThinner thinner(report.model.duration_ns, kJobStretches);
            for (const DevicePoint& point : report.model.devices[i].timeline)
                thinner.add(point);
            json timeline = json::array();
            for (const DevicePoint& point : thinner.finish())
                timeline.push_back({{"t_s", seconds_of(point.time_ns)},
                                    {"reserved_bytes", point.reserved},
                                    {"allocated_bytes", point.allocated}});
            devices[i]["timeline"] = std::move(timeline);
        }
        processes.push_back(std::move(process));
    }
    return {{"schema", "gpuleak-job/1"},
            {"reports", json::array()},
            {"run",
             {{"shared_devices", reports.front().shared_devices
                                     ? shared_devices_json(*reports.front().shared_devices)
                                     : json::array()}}},
            {"job", job_json(*reports.front().job, ended_texts(reports))},
            {"processes", std::move(processes)}};
}

json render_merged_json(const MergedReport& merged) {
    return {{"schema", "gpuleak-job/1"},
            {"reports", merged.sources},
            {"run", {{"shared_devices", shared_devices_json(merged.shared_devices)}}},
            {"job", merged.job.ranks.empty()
                        ? json()
                        : job_json(merged.job, [&](const RankRow& row) { return merged.ended_of(row); })},
            {"processes", merged.processes}};
}

} // namespace gpuleak::analyzer
