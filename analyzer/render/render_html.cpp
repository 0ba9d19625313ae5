#include "render/render_html.h"

#include <algorithm>
#include <map>
#include <tuple>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "html_assets.h"
#include "model/timeline_thinning.h"
#include "render/diagnosis_text.h"
#include "render/render_json.h"
#include "render/render_text.h"
#include "report/site_changes.h"
#include "report/stack_view.h"

namespace gpuleak::analyzer {

using nlohmann::json;

namespace {

// Past this many processes, the page draws those that say the most and lists the rest: what it draws of
// each past 32 is a floor, enough to be read, about 50 KB.
constexpr size_t kDrawnProcesses = 64;
// What one page keeps, shared among the processes it draws so that it stays within a few MB (3.1 MB for
// 64 processes, bench/README.md): the sites a flame graph draws one by one (the rest are one box), the
// sites whose activity over time it keeps for a stretch of the timeline, the frames they name, and the
// points of the timelines and the markers drawn.
constexpr size_t kSitesDrawn = 2000;
constexpr size_t kActiveSites = 300;
constexpr size_t kFrames = 30000;
constexpr size_t kTimelinePoints = 16000;
constexpr size_t kMarkers = 8000;
// The stretches the run is cut into for what a stretch made and freed.
constexpr size_t kActivityBuckets = 100;

struct Budget {
    size_t sites_drawn = kSitesDrawn;
    size_t active_sites = kActiveSites;
    size_t frames = kFrames;
    size_t timeline_points = kTimelinePoints;
    size_t markers = kMarkers;

    // A process's share of the page.
    static Budget per_process(size_t processes) {
        const size_t n = std::max<size_t>(processes, 1);
        return {std::max<size_t>(kSitesDrawn / n, 100), std::max<size_t>(kActiveSites / n, 20),
                std::max<size_t>(kFrames / n, 1000),
                std::clamp<size_t>(kTimelinePoints / n, 500, 2 * kMaxTimelinePoints),
                std::max<size_t>(kMarkers / n, 250)};
    }
};

// The frames of the page's sites, each once: sites refer to them by index. Once for the page, not for
// each process: a job's ranks, and a loader's workers, run the same code, and their frames took most of
// a page that draws 64 of them.
class FrameTable {
  public:
    explicit FrameTable(const ReportOptions& options) : options_(options) {}

    // The frames to come are of `stacks`' process, whose share of the page is `most` frames it adds.
    void start_process(StackFrames& stacks, size_t most) {
        stacks_ = &stacks;
        most_ = most;
        added_ = 0;
    }

    // Past its share of the page: the sites still to come are drawn as one box.
    [[nodiscard]] bool full() const { return added_ >= most_; }

    // The stack's frames, innermost first, as indices; a stack without frames is one frame saying so.
    json stack(uint32_t stack_id) {
        json indices = json::array();
        const std::vector<ReportFrame>& frames = stacks_->frames(stack_id);
        if (frames.empty()) {
            indices.push_back(named("(no stack)"));
            return indices;
        }
        // A native program's own frames are those of the executable its _start is in: they stay apart in
        // the graph as a Python program's do, where a library's are one box.
        const bool python =
            std::any_of(frames.begin(), frames.end(), [](const ReportFrame& f) { return f.python; });
        const std::string program = !python && frames.back().function == "_start" ? frames.back().module : "";
        for (const ReportFrame* frame : profile_frames(frames, options_))
            indices.push_back(index_of(*frame, !program.empty() && frame->module == program));
        // The stack that started a library's thread is where the program asked for what it made.
        if (const uint32_t start = stacks_->thread_start_of(stack_id); start != 0)
            for (const ReportFrame* frame : profile_frames(stacks_->frames(start), options_))
                indices.push_back(index_of(*frame, false));
        return indices;
    }

    size_t named(const std::string& name) { return add({name, "", 0, false, false, "", ""}); }

    json take() { return std::move(table_); }

  private:
    using Key = std::tuple<std::string, std::string, uint32_t, bool, bool, std::string, std::string>;

    size_t index_of(const ReportFrame& frame, bool native_program) {
        const auto [name, file] = profile_name(frame, options_);
        const bool program = frame.python ? is_program_frame(frame) : native_program;
        const std::string library = library_of(frame);
        return add({name, file, frame.line, frame.python, program, library, frame.source_line});
    }

    size_t add(const Key& key) {
        const auto [found, added] = indices_.try_emplace(key, table_.size());
        if (added) {
            ++added_;
            const auto& [name, file, line, python, program, library, source_line] = key;
            table_.push_back({{"name", name},
                              {"file", file},
                              {"line", line},
                              {"python", python},
                              {"program", program},
                              {"library", library},
                              {"source_line", source_line}});
        }
        return found->second;
    }

    const ReportOptions& options_;
    StackFrames* stacks_ = nullptr;
    size_t most_ = 0;
    size_t added_ = 0;
    std::map<Key, size_t> indices_;
    json table_ = json::array();
};

json site_json(FrameTable& frames, uint32_t stack_id, format::MemoryKind kind, uint64_t bytes,
               uint64_t count) {
    return {{"frames", frames.stack(stack_id)},
            {"kind", format::kind_name(kind)},
            {"bytes", bytes},
            {"count", count}};
}

// What was live at one moment, for a flame graph: the largest sites one by one, the rest as one box.
// `sites` come most bytes first, as the model lists them (leak sites, a moment's, a failure's).
json state_json(FrameTable& frames, const Budget& budget, const std::string& name, double t_s,
                const std::vector<LiveSiteAt>& sites, bool largest_only) {
    json drawn = json::array();
    uint64_t held = 0;
    uint64_t rest_bytes = 0;
    uint64_t rest_count = 0;
    size_t rest_sites = 0;
    for (size_t i = 0; i < sites.size(); ++i) {
        held += sites[i].bytes;
        if (i < budget.sites_drawn && !frames.full()) {
            drawn.push_back(
                site_json(frames, sites[i].stack_id, sites[i].kind, sites[i].bytes, sites[i].count));
        } else {
            rest_bytes += sites[i].bytes;
            rest_count += sites[i].count;
            ++rest_sites;
        }
    }
    if (rest_sites > 0)
        drawn.push_back(
            {{"frames", json::array({frames.named(fmt::format("({} smaller sites)", rest_sites))})},
             {"kind", "other"},
             {"bytes", rest_bytes},
             {"count", rest_count}});
    return {{"name", name},
            {"t_s", t_s},
            {"held_bytes", held},
            {"largest_only", largest_only},
            {"sites", std::move(drawn)}};
}

// Bytes per stretch of the run, as [stretch, bytes] pairs of the stretches that have any.
struct Activity {
    uint32_t stack_id = 0;
    format::MemoryKind kind = format::MemoryKind::None;
    std::map<size_t, uint64_t> made;
    std::map<size_t, uint64_t> made_live; // of `made`, what is still alive at the end
    std::map<size_t, uint64_t> freed;
    uint64_t total = 0;
};

json pairs(const std::map<size_t, uint64_t>& buckets) {
    json out = json::array();
    for (const auto& [bucket, bytes] : buckets)
        out.push_back({bucket, bytes});
    return out;
}

// The stretch of the run (of kActivityBuckets) a time since the start falls in. In integers: the times
// come from the trace, whatever they are.
size_t activity_bucket(uint64_t since_start_ns, uint64_t duration_ns) {
    using Wide = unsigned __int128;
    return static_cast<size_t>(
        std::min<Wide>(kActivityBuckets - 1, Wide{since_start_ns} * kActivityBuckets / duration_ns));
}

// `bytes` made in a span of time (since the start) into the stretches of the run it spans, in proportion
// to how much of each the span covers.
void spread_evenly(std::map<size_t, uint64_t>& buckets, uint64_t bytes, std::pair<uint64_t, uint64_t> span_ns,
                   uint64_t duration_ns) {
    using Wide = unsigned __int128;
    const auto bucket_start = [&](size_t bucket) {
        return static_cast<uint64_t>(Wide{duration_ns} * bucket / kActivityBuckets);
    };
    const uint64_t first_ns = span_ns.first;
    const uint64_t last_ns = std::max(first_ns, span_ns.second);
    const size_t last = activity_bucket(last_ns, duration_ns);
    uint64_t spread = 0;
    for (size_t bucket = activity_bucket(first_ns, duration_ns); bucket < last; ++bucket) {
        const uint64_t from = std::max(bucket_start(bucket), first_ns);
        const uint64_t to = std::min(bucket_start(bucket + 1), last_ns);
        const auto part =
            static_cast<uint64_t>(Wide{bytes} * (to > from ? to - from : 0) / (last_ns - first_ns));
        if (part > 0)
            buckets[bucket] += part;
        spread += part;
    }
    if (bytes > spread)
        buckets[last] += bytes - spread;
}

// What each site made and freed in each stretch of the run: the ring's events, and for what is alive at
// the end the live table's allocation times.
json activity_json(ProcessReport& report, FrameTable& frames, const Budget& budget) {
    const ProcessModel& model = report.model;
    const uint64_t duration = std::max<uint64_t>(model.duration_ns, 1);
    const auto bucket_of = [&](uint64_t since_start_ns) { return activity_bucket(since_start_ns, duration); };
    // By the model's sites (site_keys.h), which need no symbols: only the sites kept are symbolized.
    std::map<std::pair<uint64_t, format::MemoryKind>, Activity> by_site;
    const auto activity = [&](uint32_t stack_id, format::MemoryKind kind) -> Activity& {
        const auto [entry, added] = by_site.try_emplace({site_of(model, stack_id), kind});
        if (added) {
            entry->second.stack_id = stack_id;
            entry->second.kind = kind;
        }
        return entry->second;
    };
    for (const Event& event : model.ring_events) {
        if ((event.type != format::EventType::Alloc && event.type != format::EventType::Free) ||
            !program_holds(model, event.kind))
            continue;
        Activity& entry = activity(event.stack_id, event.kind);
        (event.type == format::EventType::Alloc
             ? entry.made
             : entry.freed)[bucket_of(since_start(event.time_ns, model.header))] += event.size;
        entry.total += event.size;
    }
    for (const LiveAllocation& live : model.live_allocations) {
        if (!program_holds(model, live.kind))
            continue;
        Activity& entry = activity(live.stack_id, live.kind);
        entry.made_live[bucket_of(since_start(live.time_ns, model.header))] += live.size;
        entry.total += live.size;
    }
    // Those without a slot of their own are known by the stretches of the run they were made in: each
    // stretch's share of its site's bytes (by its count of all the stretches' counts, the last stretch the
    // rest), spread evenly over its time. Counts read as a killed process left them may disagree.
    uint64_t spread_allocations = 0;
    for (const SpilledSite& spilled : model.spilled_allocations) {
        uint64_t counts = 0;
        for (const SpilledSite::Stretch& stretch : spilled.stretches)
            counts += stretch.count;
        if (!program_holds(model, spilled.kind) || counts == 0)
            continue;
        spread_allocations += spilled.count;
        Activity& entry = activity(spilled.stack_id, spilled.kind);
        uint64_t counted = 0;
        for (size_t i = 0; i < spilled.stretches.size(); ++i) {
            const SpilledSite::Stretch& stretch = spilled.stretches[i];
            const uint64_t bytes = i + 1 == spilled.stretches.size()
                                       ? spilled.bytes - counted
                                       : static_cast<uint64_t>(static_cast<unsigned __int128>(spilled.bytes) *
                                                               stretch.count / counts);
            counted += bytes;
            spread_evenly(entry.made_live, bytes,
                          {since_start(stretch.first_time_ns, model.header),
                           since_start(stretch.last_time_ns, model.header)},
                          duration);
        }
        entry.total += spilled.bytes;
    }
    std::vector<Activity*> sites;
    sites.reserve(by_site.size());
    for (auto& [site, entry] : by_site)
        sites.push_back(&entry);
    std::sort(sites.begin(), sites.end(), [](const Activity* a, const Activity* b) {
        return std::tie(b->total, a->stack_id, a->kind) < std::tie(a->total, b->stack_id, b->kind);
    });
    json drawn = json::array();
    size_t kept = 0;
    for (; kept < sites.size() && kept < budget.active_sites && !frames.full(); ++kept) {
        const Activity* site = sites[kept];
        drawn.push_back({{"frames", frames.stack(site->stack_id)},
                         {"kind", format::kind_name(site->kind)},
                         {"made", pairs(site->made)},
                         {"made_live", pairs(site->made_live)},
                         {"freed", pairs(site->freed)}});
    }
    std::optional<uint64_t> oldest;
    if (model.events_overwritten > 0 && !model.ring_events.empty())
        oldest = since_start(model.ring_events.front().time_ns, model.header);
    return {{"buckets", kActivityBuckets},
            {"duration_s", seconds_of(duration)},
            {"events_from_s", oldest ? json(seconds_of(*oldest)) : json()},
            {"sites_left_out", sites.size() - kept},
            {"spread", spread_allocations},
            {"sites", std::move(drawn)}};
}

json pictures_json(ProcessReport& report, FrameTable& frames, const Budget& budget) {
    const ProcessModel& model = report.model;
    frames.start_process(*report.stacks, budget.frames);
    json states = json::array();
    uint64_t cached = 0;
    if (model.reports_blocks)
        for (const DeviceSummary& device : model.devices)
            cached += device.cached();
    json end = state_json(frames, budget, "the end", seconds_of(model.duration_ns),
                          state_at_end(report).sites, false);
    end["cached_bytes"] = cached;
    states.push_back(std::move(end));
    if (model.peak)
        states.push_back(state_json(frames, budget,
                                    fmt::format("the peak at {:.2f} s", seconds_of(*model.peak->time_ns)),
                                    seconds_of(*model.peak->time_ns), model.peak->sites, false));
    for (size_t i = 0; i < model.failures.size(); ++i) {
        const FailureSummary& failure = model.failures[i];
        if (!failure.reserved_then)
            continue;
        states.push_back(state_json(
            frames, budget, fmt::format("failure #{} at {:.2f} s", i + 1, seconds_of(failure.time_ns)),
            seconds_of(failure.time_ns), failure.top_sites_then, true));
    }
    json activity = activity_json(report, frames, budget);
    return {{"states", std::move(states)}, {"activity", std::move(activity)}};
}

// Of `count` points, those a timeline of at most `most` keeps: the first and the last, and in each
// stretch of points the one where `value(i)` is highest and the one where it is lowest, so that no
// peak and no trough is lost.
template <class Value> std::vector<size_t> kept_points(size_t count, size_t most, Value&& value) {
    std::vector<size_t> kept;
    if (count <= most) {
        for (size_t i = 0; i < count; ++i)
            kept.push_back(i);
        return kept;
    }
    const size_t stretch = (count + most / 2 - 1) / (most / 2);
    kept.push_back(0);
    for (size_t first = 0; first < count; first += stretch) {
        const size_t end = std::min(count, first + stretch);
        size_t high = first;
        size_t low = first;
        for (size_t i = first; i < end; ++i) {
            if (value(i) > value(high))
                high = i;
            if (value(i) < value(low))
                low = i;
        }
        kept.push_back(std::min(high, low));
        kept.push_back(std::max(high, low));
    }
    kept.push_back(count - 1);
    kept.erase(std::unique(kept.begin(), kept.end()), kept.end());
    return kept;
}

// The named fields of the points kept, as one array each: {"t_s": [...], "rss_bytes": [...]}.
json columns(const json& points, const std::vector<size_t>& kept, std::initializer_list<const char*> fields) {
    json out = json::object();
    for (const char* field : fields) {
        json& column = out[field] = json::array();
        for (const size_t i : kept)
            column.push_back(points[i][field]);
    }
    return out;
}

// What the page draws of a process: the JSON report's entry without the lists it does not show (the
// sites and holders, which the flame graph and the text report give), its timelines as columns within
// the process's share of the page, and its markers, every n-th where there are more than the share.
json page_process(json process, const ProcessModel& model, const Budget& budget) {
    for (const char* unshown : {"leaks", "growth", "spent_graphs", "kept_for_backward", "retainers"})
        process.erase(unshown);
    // Where a process used several devices, a chart each beside the process's, sharing its points; a single
    // device's timeline is the process's, drawn once.
    json& devices = process["summary"]["devices"];
    const size_t charts = devices.size() > 1 ? devices.size() + 1 : 1;
    const size_t per_chart = std::max<size_t>(budget.timeline_points / charts, 100);
    const auto memory_columns = [&](const json& points) {
        return columns(points,
                       kept_points(points.size(), per_chart,
                                   [&](size_t i) {
                                       return points[i]["reserved_bytes"].get<uint64_t>() +
                                              points[i]["allocated_bytes"].get<uint64_t>();
                                   }),
                       {"t_s", "reserved_bytes", "allocated_bytes"});
    };
    process["timeline"] = memory_columns(process["timeline"]);
    for (json& device : devices) {
        device["timeline"] = memory_columns(devices.size() > 1 ? device["timeline"] : json::array());
        const json& used = device["driver_used"];
        device["driver_used"] = columns(
            used,
            kept_points(used.size(), per_chart, [&](size_t i) { return used[i]["bytes"].get<uint64_t>(); }),
            {"t_s", "bytes"});
    }
    json& host = process["host"];
    const json& points = host["timeline"];
    const std::vector<size_t> host_kept = kept_points(points.size(), budget.timeline_points, [&](size_t i) {
        const json& uss = points[i]["uss_bytes"];
        return points[i]["rss_bytes"].get<uint64_t>() + (uss.is_null() ? 0 : uss.get<uint64_t>());
    });
    host["timeline"] = columns(points, host_kept, {"t_s", "rss_bytes", "uss_bytes"});
    json& markers = process["markers"];
    process["markers_set"] = markers.size();
    if (markers.size() > budget.markers) {
        const size_t every = (markers.size() + budget.markers - 1) / budget.markers;
        json shown = json::array();
        for (size_t i = 0; i < markers.size(); i += every)
            shown.push_back(markers[i]);
        markers = std::move(shown);
    }
    // Every failure on the timeline, not only the --top the JSON lists.
    json failures = json::array();
    for (const FailureSummary& failure : model.failures)
        failures.push_back({{"t_s", seconds_of(failure.time_ns)},
                            {"bytes", failure.bytes},
                            {"device", failure.device},
                            {"out_of_memory", failure.out_of_memory()}});
    process["failures"] = std::move(failures);
    return process;
}

// Which processes the page draws: all of them up to kDrawnProcesses, else that many of those that say the
// most, a verdict other than stable (or growth of host memory) first, then the most device memory, then
// the most host memory, in the report's order among equals. The rest are in the process table only.
std::vector<bool> drawn_processes(const std::vector<ProcessReport>& reports) {
    std::vector<bool> drawn(reports.size(), reports.size() <= kDrawnProcesses);
    if (reports.size() <= kDrawnProcesses)
        return drawn;
    std::vector<size_t> order(reports.size());
    for (size_t i = 0; i < order.size(); ++i)
        order[i] = i;
    const auto weight = [&](size_t i) {
        const ProcessReport& report = reports[i];
        const bool says_something =
            report.diagnosis.kind != DiagnosisKind::Stable || report.diagnosis.host_ram.has_value();
        uint64_t peak_reserved = 0;
        for (const DeviceSummary& device : report.model.devices)
            peak_reserved += device.peak_reserved;
        return std::make_tuple(says_something, peak_reserved, report.model.host.peak_rss);
    };
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return weight(a) > weight(b); });
    for (size_t i = 0; i < kDrawnProcesses; ++i)
        drawn[order[i]] = true;
    return drawn;
}

// A process the page lists without drawing it: what its row in the process table says.
json listed_process(const json& process) {
    json listed = json::object();
    for (const char* field : {"pid", "ppid", "role", "command", "trace", "host_only"})
        listed[field] = process[field];
    const json& summary = process["summary"];
    listed["summary"] = {{"peak_reserved_bytes", summary["peak_reserved_bytes"]},
                         {"final_allocated_bytes", summary["final_allocated_bytes"]}};
    listed["diagnosis"] = {{"kind", process["diagnosis"]["kind"]}, {"text", process["diagnosis"]["text"]}};
    listed["drawn"] = false;
    return listed;
}

// JSON inside a <script> element: "</" would end it early, and "<!--" could start a comment state.
std::string script_safe(const std::string& text) {
    std::string out;
    out.reserve(text.size());
    for (size_t i = 0; i < text.size(); ++i) {
        if (text[i] == '<' && i + 1 < text.size() && (text[i + 1] == '/' || text[i + 1] == '!'))
            out += "\\u003c";
        else
            out += text[i];
    }
    return out;
}

// The template with each of its placeholders ("@DATA@") replaced. Only the template is searched: what
// replaces a placeholder (the data, the script) may hold anything.
std::string filled(std::string_view page, const std::map<std::string_view, std::string_view>& values) {
    std::string out;
    size_t at = 0;
    for (size_t start = page.find('@'); start != std::string_view::npos; start = page.find('@', at)) {
        const size_t end = page.find('@', start + 1);
        const auto value =
            end == std::string_view::npos ? values.end() : values.find(page.substr(start, end - start + 1));
        if (value == values.end()) {
            out += page.substr(at, start + 1 - at);
            at = start + 1;
            continue;
        }
        out += page.substr(at, start - at);
        out += value->second;
        at = end + 1;
    }
    return out + std::string(page.substr(at));
}

std::string page_of(const json& document) {
    // Command lines and paths may not be UTF-8: JSON must be (U+FFFD for the rest).
    const std::string data = script_safe(document.dump(-1, ' ', false, json::error_handler_t::replace));
    return filled(html_assets::kTemplate,
                  {{"@STYLE@", html_assets::kStyle}, {"@SCRIPT@", html_assets::kScript}, {"@DATA@", data}});
}

} // namespace

std::string render_changes_html(Comparison& comparison, const ReportOptions& options) {
    json document = render_changes_json(comparison, options);
    // Each site's stack as the text report shows it: the program's lines, libraries' runs collapsed.
    json& changes = document["changes"];
    const std::vector<const SiteChange*> shown = shown_changes(comparison, options);
    for (size_t i = 0; i < changes.size(); ++i) {
        const SiteChange& change = *shown[i];
        const MemoryState& shown = change.after ? comparison.after : comparison.before;
        changes[i]["lines"] = stack_text(
            *shown.report->stacks, change.after ? change.after->stack_id : change.before->stack_id, options);
    }
    return page_of(document);
}

std::string render_html(ReportSet& set, const ReportOptions& options) {
    json document = run_json(set);
    std::vector<ProcessReport>& reports = set.all();
    // The page says of the job what the text report says, and draws its ranks.
    if (!reports.empty() && reports.front().job)
        document["job"]["findings"] = job_findings(*reports.front().job, ended_texts(reports));
    const std::vector<bool> drawn = drawn_processes(reports);
    const Budget budget = Budget::per_process(std::count(drawn.begin(), drawn.end(), true));
    FrameTable frames(options);
    for (size_t i = 0; i < reports.size(); ++i) {
        ProcessReport& report = set.whole(i);
        json process = process_json(report, options);
        if (!drawn[i]) {
            document["processes"].push_back(listed_process(process));
            continue;
        }
        process = page_process(std::move(process), report.model, budget);
        process["pictures"] = pictures_json(report, frames, budget);
        process["drawn"] = true;
        document["processes"].push_back(std::move(process));
    }
    document["frames"] = frames.take();
    return page_of(document);
}

std::string render_merged_html(const MergedReport& merged) {
    json document = render_merged_json(merged);
    if (!merged.job.ranks.empty())
        document["job"]["findings"] =
            job_findings(merged.job, [&](const RankRow& row) { return merged.ended_of(row); });
    // Each machine's own page draws its processes: this one lists them.
    for (json& process : document["processes"])
        process = listed_process(process);
    return page_of(document);
}

} // namespace gpuleak::analyzer
