#include "report/merged_report.h"

#include <algorithm>
#include <filesystem>
#include <fmt/format.h>
#include <fstream>
#include <initializer_list>
#include <optional>
#include <string_view>
#include <system_error>

#include "model/physical_devices.h"
#include "read/trace_error.h"

namespace gpuleak::analyzer {

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// A run directory's report for a merge: its job.json, the few KB of it a merge reads, else its
// report.json; empty where it has neither.
std::string report_of_run(const fs::path& run) {
    std::error_code error;
    for (const char* name : {"job.json", "report.json"})
        if (fs::is_regular_file(run / name, error))
            return (run / name).string();
    return {};
}

// The reports of a directory: its own, else those of its runs' directories (a job's -o DIR), by name.
std::vector<std::string> reports_in(const std::string& directory) {
    if (std::string own = report_of_run(directory); !own.empty())
        return {own};
    std::error_code error;
    std::vector<std::string> found;
    for (const fs::directory_entry& entry : fs::directory_iterator(directory, error))
        if (entry.is_directory(error))
            if (std::string report = report_of_run(entry.path()); !report.empty())
                found.push_back(std::move(report));
    if (error)
        throw TraceError(directory, "cannot read the directory: " + error.message());
    std::sort(found.begin(), found.end());
    if (found.empty())
        throw TraceError(directory,
                         "neither job.json nor report.json in it or in its subdirectories (gpuleak "
                         "run writes them beside each run's traces)");
    return found;
}

// A machine's report, without what a merge does not read: each process's sites, holders, failures, host
// memory and timeline (its devices' timelines stay), which make most of its bytes. A thousand ranks'
// reports are then held at once in a few hundred MiB.
json read_report(const std::string& path) {
    std::ifstream file(path);
    if (!file)
        throw TraceError(path, "cannot open it");
    std::vector<std::string> keys; // the keys down to the value being parsed, by depth
    const json::parser_callback_t keep = [&](int depth, json::parse_event_t event, json& parsed) {
        if (event != json::parse_event_t::key || !parsed.is_string())
            return true;
        const auto at = static_cast<size_t>(depth);
        keys.resize(at);
        const std::string& key = parsed.get_ref<const std::string&>();
        keys[at - 1] = key;
        if (at == 2 && keys[0] == "run")
            return key != "shared_devices";
        if (keys[0] != "processes" || at < 3)
            return true;
        return merge_reads(at - 2, keys[2], key);
    };
    json report = json::parse(file, keep, false);
    if (report.is_discarded() || !report.is_object())
        throw TraceError(path, "not JSON: --merge reads the report.json files gpuleak run writes");
    const std::string schema = report.value("schema", "");
    if (schema != "gpuleak-report/1" && schema != "gpuleak-job/1")
        throw TraceError(path,
                         "not a gpuleak report (its schema is neither gpuleak-report/1 nor gpuleak-job/1)");
    if (!report.contains("processes") || !report["processes"].is_array())
        throw TraceError(path, "a gpuleak report without its processes");
    return report;
}

// A field of a report that must be there, as `T`: a report another tool changed is refused in one line.
template <class T> T field(const json& object, const char* name, const std::string& path) {
    const auto found = object.find(name);
    if (found == object.end())
        throw TraceError(path, fmt::format("a gpuleak report without its \"{}\"", name));
    try {
        return found->get<T>();
    } catch (const json::exception&) {
        throw TraceError(path, fmt::format("a gpuleak report whose \"{}\" is not what gpuleak writes", name));
    }
}

template <class T> std::optional<T> maybe(const json& object, const char* name, const std::string& path) {
    const auto found = object.find(name);
    if (found == object.end() || found->is_null())
        return std::nullopt;
    return field<T>(object, name, path);
}

DiagnosisKind kind_named(const std::string& name, const std::string& path) {
    for (const DiagnosisKind kind :
         {DiagnosisKind::Leak, DiagnosisKind::CacheGrowth, DiagnosisKind::OutsideAllocators,
          DiagnosisKind::HostRamGrowth, DiagnosisKind::PoolExhausted, DiagnosisKind::Incomplete,
          DiagnosisKind::Stable})
        if (name == diagnosis_kind_name(kind))
            return kind;
    throw TraceError(path, fmt::format("a rank's diagnosis \"{}\" is not one gpuleak gives", name));
}

// A process's words in the process tables: its role's, else its command line.
std::string process_name(const json& process) {
    const auto role = process.find("role");
    if (role != process.end() && role->is_object() && role->value("text", "") != "")
        return (*role)["text"].get<std::string>();
    std::string command;
    for (const json& argument : process.value("command", json::array()))
        if (argument.is_string())
            command += (command.empty() ? "" : " ") + argument.get<std::string>();
    return command;
}

struct Source {
    std::string path;
    size_t first_process = 0; // in MergedReport::processes
    size_t processes = 0;
};

// The process of `source` with `pid`, among the merged ones.
size_t process_of(const MergedReport& merged, const Source& source, int pid) {
    for (size_t i = source.first_process; i < source.first_process + source.processes; ++i)
        if (merged.processes[i].value("pid", -1) == pid)
            return i;
    throw TraceError(source.path, fmt::format("its job names pid {}, which none of its processes is", pid));
}

RankRow row_from(const json& row, const MergedReport& merged, const Source& source) {
    const std::string& path = source.path;
    RankRow parsed;
    parsed.pid = field<int>(row, "pid", path);
    parsed.process = process_of(merged, source, parsed.pid);
    parsed.rank = field<int>(row, "rank", path);
    parsed.local_rank = maybe<int>(row, "local_rank", path).value_or(-1);
    parsed.node_rank = maybe<int>(row, "node_rank", path).value_or(-1);
    parsed.host = field<std::string>(row, "hostname", path);
    parsed.devices = field<std::vector<int>>(row, "devices", path);
    parsed.peak_reserved = field<uint64_t>(row, "peak_reserved_bytes", path);
    parsed.final_reserved = field<uint64_t>(row, "final_reserved_bytes", path);
    parsed.peak_allocated = field<uint64_t>(row, "peak_allocated_bytes", path);
    parsed.final_allocated = field<uint64_t>(row, "final_allocated_bytes", path);
    parsed.verdict = kind_named(field<std::string>(row, "diagnosis", path), path);
    parsed.leaked = field<uint64_t>(row, "leaked_bytes", path);
    parsed.top_site = maybe<std::string>(row, "top_site", path).value_or("");
    parsed.top_site_bytes = field<uint64_t>(row, "top_site_bytes", path);
    return parsed;
}

// What the facts across processes need of one, from its JSON: its machine and times, its devices and their
// timelines, its contexts.
ProcessModel model_from(const json& process, const std::string& path) {
    ProcessModel model;
    model.header.hostname = field<std::string>(process, "hostname", path);
    model.header.pid = field<int>(process, "pid", path);
    model.header.start_realtime_ns =
        static_cast<uint64_t>(field<double>(process, "started_unix_s", path) * 1e9);
    model.duration_ns = static_cast<uint64_t>(field<double>(process, "duration_s", path) * 1e9);
    const std::string role = field<json>(process, "role", path).value("kind", "");
    if (role == role_kind_name(RoleKind::DataLoaderWorker))
        model.role.kind = RoleKind::DataLoaderWorker;
    else if (role == role_kind_name(RoleKind::Rank))
        model.role.kind = RoleKind::Rank;
    for (const json& device : field<json>(field<json>(process, "summary", path), "devices", path)) {
        DeviceSummary summary;
        summary.device = field<int>(device, "device", path);
        summary.peak_reserved = field<uint64_t>(device, "peak_reserved_bytes", path);
        summary.final_reserved = field<uint64_t>(device, "final_reserved_bytes", path);
        summary.capacity = maybe<uint64_t>(device, "capacity_bytes", path);
        for (const json& point : field<json>(device, "timeline", path))
            summary.timeline.push_back({static_cast<uint64_t>(field<double>(point, "t_s", path) * 1e9),
                                        field<uint64_t>(point, "reserved_bytes", path),
                                        field<uint64_t>(point, "allocated_bytes", path)});
        model.devices.push_back(std::move(summary));
    }
    for (const json& context : field<json>(process, "contexts", path))
        model.contexts.push_back({field<int>(context, "device", path),
                                  static_cast<uint64_t>(field<double>(context, "t_s", path) * 1e9), 0,
                                  maybe<std::string>(context, "uuid", path).value_or("")});
    return model;
}

size_t rank_index(const JobFacts& job, int rank, const std::string& path) {
    const auto found = std::find_if(job.ranks.begin(), job.ranks.end(),
                                    [&](const RankRow& row) { return row.rank == rank; });
    if (found == job.ranks.end())
        throw TraceError(path, fmt::format("its job names rank {}, which none of its rows is", rank));
    return static_cast<size_t>(found - job.ranks.begin());
}

} // namespace

bool merge_reads(size_t level, std::string_view top, std::string_view key) {
    const auto one_of = [&](std::initializer_list<std::string_view> names) {
        return std::find(names.begin(), names.end(), key) != names.end();
    };
    if (level == 1)
        return one_of({"trace", "pid", "ppid", "hostname", "job", "started_unix_s", "command", "role",
                       "ended", "host_only", "duration_s", "summary", "contexts", "diagnosis"});
    if (level == 2 && top == "summary")
        return one_of({"peak_reserved_bytes", "final_reserved_bytes", "peak_allocated_bytes",
                       "final_allocated_bytes", "devices"});
    if (level == 2 && top == "diagnosis")
        return one_of({"kind", "text"});
    if (level == 2 && top == "ended")
        return key == "text";
    return !(level == 4 && top == "summary" && key == "driver_used");
}

MergedReport merge_reports(const std::vector<std::string>& inputs) {
    std::vector<std::string> paths;
    for (const std::string& input : inputs) {
        std::error_code error;
        if (fs::is_directory(input, error)) {
            for (std::string& found : reports_in(input))
                paths.push_back(std::move(found));
        } else {
            paths.push_back(input);
        }
    }
    MergedReport merged;
    std::vector<json> jobs; // each report's
    std::vector<Source> sources;
    std::vector<ProcessModel> models; // each process's, as the facts across processes read them
    for (const std::string& path : paths) {
        json document = read_report(path);
        Source source{path, merged.processes.size(), document["processes"].size()};
        for (json& process : document["processes"]) {
            models.push_back(model_from(process, path));
            // The model holds its devices' timelines: the merged report is of the job, and each machine's
            // report has them.
            for (json& device : process["summary"]["devices"])
                device.erase("timeline");
            merged.process_names.push_back(process_name(process));
            merged.processes.push_back(std::move(process));
        }
        merged.sources.push_back(path);
        sources.push_back(source);
        jobs.push_back(std::move(document["job"]));
    }
    // The rows first, by rank: the facts that name ranks find them there.
    for (size_t i = 0; i < jobs.size(); ++i) {
        const json& job = jobs[i];
        if (job.is_null())
            continue;
        if (merged.job.id.empty())
            merged.job.id = maybe<std::string>(job, "id", sources[i].path).value_or("");
        merged.job.world_size =
            std::max(merged.job.world_size, maybe<int>(job, "world_size", sources[i].path).value_or(-1));
        for (const json& row : field<json>(job, "ranks", sources[i].path)) {
            RankRow parsed = row_from(row, merged, sources[i]);
            const bool twice = std::any_of(merged.job.ranks.begin(), merged.job.ranks.end(),
                                           [&](const RankRow& other) { return other.rank == parsed.rank; });
            if (twice) {
                merged.warnings.push_back(
                    fmt::format("{}: warning: rank {} is in an earlier report too; this "
                                "one is left out of the job",
                                sources[i].path, parsed.rank));
                continue;
            }
            merged.job.ranks.push_back(std::move(parsed));
        }
    }
    std::stable_sort(merged.job.ranks.begin(), merged.job.ranks.end(),
                     [](const RankRow& a, const RankRow& b) { return a.rank < b.rank; });
    for (size_t i = 0; i < jobs.size(); ++i) {
        const std::string& path = sources[i].path;
        const json& job = jobs[i];
        if (!job.is_null()) {
            for (const json& failed : field<json>(job, "failed", path)) {
                FailedRank parsed;
                const int rank = field<int>(failed, "rank", path);
                parsed.index = rank_index(merged.job, rank, path);
                parsed.out_of_memory = field<bool>(failed, "out_of_memory", path);
                parsed.asked_bytes = maybe<uint64_t>(failed, "asked_bytes", path).value_or(0);
                parsed.device = maybe<int>(failed, "device", path).value_or(0);
                parsed.reserved_then = maybe<uint64_t>(failed, "reserved_bytes", path);
                parsed.failure_site = maybe<std::string>(failed, "failure_site", path).value_or("");
                parsed.killed = field<bool>(failed, "killed", path);
                parsed.ended_realtime_ns =
                    static_cast<uint64_t>(field<double>(failed, "ended_unix_s", path) * 1e9);
                merged.ended[rank] = field<std::string>(failed, "ended", path);
                merged.job.failed.push_back(std::move(parsed));
            }
        }
    }
    // What spans the machines' runs (ranks of one machine launched apart, as srun launches each task) is
    // judged again from their processes: who touched which physical device.
    std::vector<const ProcessModel*> modelled;
    modelled.reserve(models.size());
    for (const ProcessModel& model : models)
        modelled.push_back(&model);
    const PhysicalDevices physical(modelled);
    const auto context_where = [&](size_t process, int device) {
        for (const json& context : merged.processes[process].value("contexts", json::array()))
            if (context.value("device", -1) == device && context["where"].is_string())
                return context["where"].get<std::string>();
        return std::string();
    };
    find_intruders(merged.job, modelled, physical, context_where);
    if (const auto shared = shared_devices(
            modelled, physical,
            [&](size_t process, const DeviceContext& context) {
                return context_where(process, context.device);
            },
            [&](size_t process, int device) { return device_timeline(*modelled[process], device); }))
        merged.shared_devices = *shared;
    judge_ranks(merged.job);
    return merged;
}

} // namespace gpuleak::analyzer
