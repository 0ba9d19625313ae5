#include "render/renderers.h"

#include <algorithm>
#include <array>

#include <fmt/format.h>

#include "render/render_html.h"
#include "render/render_json.h"
#include "render/render_pprof.h"
#include "render/render_text.h"
#include "render/render_torch_snapshot.h"
#include "render/render_watch.h"

namespace gpuleak::analyzer {

namespace {

void text(ReportSet& reports, const ReportOptions& options, const ReportSink& write,
          std::vector<std::string>& /*warnings*/) {
    render_text(reports, options, write);
}

// Command lines, paths and labels come from the traced program and may not be UTF-8; JSON must be, and
// the strict default would throw instead of writing U+FFFD for those bytes.
std::string json_text(const nlohmann::json& document) {
    return document.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

// render_json's document as json_text writes it, each process's JSON made, written and dropped in turn.
void json(ReportSet& reports, const ReportOptions& options, const ReportSink& write,
          std::vector<std::string>& /*warnings*/) {
    const std::string run = json_text(run_json(reports));
    // A top-level key, at the document's first indent; no string holds a raw newline.
    const std::string no_processes = "\n  \"processes\": []";
    const size_t closing = run.find(no_processes) + no_processes.size() - 1;
    write(std::string_view(run).substr(0, closing));
    for (size_t i = 0; i < reports.size(); ++i) {
        std::string process = json_text(process_json(reports.whole(i), options));
        process.pop_back();
        std::string indented = i == 0 ? "\n" : ",\n";
        // Indented as a member of the array, a line at a time.
        for (size_t line = 0; line < process.size();) {
            const size_t next = std::min(process.find('\n', line), process.size() - 1) + 1;
            indented += "    ";
            indented.append(process, line, next - line);
            line = next;
        }
        write(indented);
    }
    if (!reports.empty())
        write("\n  ");
    write(std::string_view(run).substr(closing));
}

std::string json_changes(Comparison& comparison, const ReportOptions& options) {
    return json_text(render_changes_json(comparison, options));
}

void job(ReportSet& reports, const ReportOptions& options, const ReportSink& write,
         std::vector<std::string>& warnings) {
    const nlohmann::json document = render_job_json(reports, options);
    if (document.is_null()) {
        warnings.emplace_back("--format job: no process is a rank, so the run is no job; nothing written");
        return;
    }
    write(json_text(document));
}

std::string json_merged(const MergedReport& merged, const ReportOptions& /*options*/) {
    return json_text(render_merged_json(merged));
}

std::string html_merged(const MergedReport& merged, const ReportOptions& /*options*/) {
    return render_merged_html(merged);
}

void torch_snapshot(ReportSet& reports, const ReportOptions& options, const ReportSink& write,
                    std::vector<std::string>& warnings) {
    std::vector<std::string> unplaced;
    ProcessReport& report = reports.whole(0);
    write(render_torch_snapshot(report, options, unplaced));
    for (const std::string& warning : unplaced)
        warnings.push_back(fmt::format("{}: warning: {}", report.model.path, warning));
}

void html(ReportSet& reports, const ReportOptions& options, const ReportSink& write,
          std::vector<std::string>& /*warnings*/) {
    write(render_html(reports, options));
}

void watch(ReportSet& reports, const ReportOptions& options, const ReportSink& write,
           std::vector<std::string>& /*warnings*/) {
    WatchOptions watching;
    watching.color = options.color;
    write(render_watch_frame(reports, watching));
}

void pprof(ReportSet& reports, const ReportOptions& options, const ReportSink& write,
           std::vector<std::string>& warnings) {
    write(render_pprof(reports, options, warnings));
}

const std::array kRenderers{
    Renderer{"text", "what a terminal shows: the diagnosis, then a screenful per process", "text/plain",
             "report.txt", false, false, ModelDetail::Summary, text, render_changes_text, render_merged_text},
    Renderer{"json", "the whole report as JSON (schema gpuleak-report/1)", "application/json", "report.json",
             false, false, ModelDetail::Summary, json, json_changes, json_merged},
    Renderer{"html",
             "one self-contained page for a browser: the memory timeline with markers and failures, the "
             "diagnosis, a flame graph of what holds the memory, what a stretch of the run made",
             "text/html", "report.html", false, false, ModelDetail::Allocations, html, render_changes_html,
             html_merged},
    Renderer{
        "job",
        "a job's run as gpuleak-report --merge reads it (schema gpuleak-job/1): its ranks, the devices its "
        "processes shared, each process in a few KB; gpuleak run writes it where a process is a rank",
        "application/json", "job.json", false, false, ModelDetail::Summary, job},
    Renderer{"torch-snapshot",
             "PyTorch's memory snapshot pickle of one process, for python -m torch.cuda._memory_viz and "
             "pytorch.org/memory_viz",
             "application/x-python-pickle", "", true, true, ModelDetail::Allocations, torch_snapshot},
    Renderer{
        "watch",
        "one frame of what gpuleak watch shows of a running program: each device's memory now and lately, "
        "the sites growing now, failures; how each process ended and its diagnosis once all have",
        "text/plain", "", false, false, ModelDetail::Summary, watch},
    Renderer{"pprof",
             "a gzipped profile.proto of the memory live at the end, by stack, for go tool pprof and "
             "speedscope",
             "application/gzip", "", true, false, ModelDetail::Allocations, pprof},
};

} // namespace

std::span<const Renderer> renderers() {
    return kRenderers;
}

const Renderer* find_renderer(std::string_view name) {
    const auto found =
        std::find_if(kRenderers.begin(), kRenderers.end(), [&](const Renderer& r) { return r.name == name; });
    return found == kRenderers.end() ? nullptr : &*found;
}

std::string format_table_json() {
    nlohmann::json formats = nlohmann::json::array();
    for (const Renderer& renderer : renderers())
        formats.push_back({{"name", renderer.name},
                           {"description", renderer.description},
                           {"media_type", renderer.media_type},
                           {"binary", renderer.binary},
                           {"one_process", renderer.one_process},
                           {"run_file", renderer.run_file},
                           {"changes", renderer.render_changes != nullptr}});
    return json_text({{"schema", "gpuleak-formats/1"}, {"formats", std::move(formats)}});
}

} // namespace gpuleak::analyzer
