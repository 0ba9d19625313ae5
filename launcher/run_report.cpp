#include "launcher/run_report.h"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <thread>
#include <unistd.h>

#include "common/file_bytes.h"
#include "launcher/launcher_error.h"
#include "launcher/say.h"
#include "read/trace_set.h"
#include "render/renderers.h"
#include "report/report_builder.h"
#include "symbols/symbol_cache.h"

namespace gpuleak::launcher {

namespace {

// The report `renderer` writes as it makes it, into the file `name` of the run's directory, which it
// replaces once whole; 0600, as the traces are made: the report holds their stacks and paths. Its path, or
// empty where the format had nothing to say of the run (job.json of a run that is no job).
std::string write_file(const RunDirectory& directory, const std::string& name,
                       const analyzer::Renderer& renderer, analyzer::ReportSet& reports) {
    std::string path = directory.path + "/" + name;
    ReplacingFile file(directory.handle.get(), name.c_str(), 0600);
    // The model's warnings are in the text report; a run's report has no other place for a renderer's.
    std::vector<std::string> warnings;
    renderer.render(
        reports, analyzer::ReportOptions{},
        [&](std::string_view part) {
            if (!part.empty())
                file.write(part.data(), part.size());
        },
        warnings);
    if (!file.started())
        return {};
    if (const int failure = file.commit(); failure != 0)
        throw LauncherError(
            fmt::format("{}: cannot write the report: {}", path, write_failure_text(failure)));
    return path;
}

// The command's children may outlive it for a moment (multiprocessing's resource tracker reads its
// pipe to the end, then exits): their ends are waited for, a while, so that the report does not take
// them for killed. Those still running after it are reported so.
void wait_for_the_run(const std::vector<std::string>& traces) {
    constexpr auto kPatience = std::chrono::seconds(5);
    constexpr auto kQuietWait = std::chrono::seconds(1);
    const auto started = std::chrono::steady_clock::now();
    bool said = false;
    for (;;) {
        const std::vector<analyzer::TraceLineage> running = analyzer::traces_still_written(traces);
        const auto waited = std::chrono::steady_clock::now() - started;
        if (running.empty() || waited >= kPatience)
            return;
        if (!said && waited >= kQuietWait) {
            std::vector<int32_t> pids;
            pids.reserve(running.size());
            for (const analyzer::TraceLineage& process : running)
                pids.push_back(process.pid);
            say(fmt::format("waiting up to {} s for {} of the run still running (pid {})",
                            std::chrono::duration_cast<std::chrono::seconds>(kPatience).count(),
                            pids.size() == 1 ? "a process" : fmt::format("{} processes", pids.size()),
                            fmt::join(pids, ", ")));
            said = true;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
}

} // namespace

RunReport write_run_report(const RunDirectory& directory) {
    // As gpuleak-report without --debuginfod: the report never goes to the network (Debian sets
    // DEBUGINFOD_URLS in login shells). The command, started already, keeps its own environment.
    ::unsetenv("DEBUGINFOD_URLS");
    RunReport report;
    analyzer::SymbolizeOptions symbolize;
    symbolize.cache_directory = analyzer::default_symbol_cache_directory();
    wait_for_the_run(analyzer::collect_traces({directory.path}).paths);
    // Anew: a process that exec'd meanwhile took its trace away, one started meanwhile made one.
    const analyzer::CollectedTraces traces = analyzer::collect_traces({directory.path});
    if (!traces.foreign.empty())
        say(fmt::format("left out {} trace{} of another user found in {}: {}", traces.foreign.size(),
                        traces.foreign.size() == 1 ? "" : "s", directory.path,
                        fmt::join(traces.foreign, ", ")));
    // As much of each trace as the formats written need (the page draws what each stretch made).
    analyzer::ModelDetail detail = analyzer::ModelDetail::Summary;
    for (const analyzer::Renderer& renderer : analyzer::renderers())
        if (!renderer.run_file.empty())
            detail = std::max(detail, renderer.detail);
    report.processes = analyzer::build_reports(traces.paths, symbolize, detail);
    // gpuleak-report's defaults, no colour in a file.
    for (const analyzer::Renderer& renderer : analyzer::renderers())
        if (!renderer.run_file.empty())
            if (std::string path =
                    write_file(directory, std::string(renderer.run_file), renderer, report.processes);
                !path.empty())
                report.files.push_back(std::move(path));
    return report;
}

} // namespace gpuleak::launcher
