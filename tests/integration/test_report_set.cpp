// A report of many processes keeps only each one's summary, and makes each process's whole report again
// from its trace when a renderer comes to its part (ReportSet): every format must say what the report
// kept whole says, and a trace that changed or went away meanwhile must not pass unnoticed.
#include <catch2/catch.hpp>

#include <csignal>
#include <filesystem>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

#include "read/trace_error.h"
#include "render/render_text.h"
#include "render/renderers.h"
#include "report/report_builder.h"
#include "traced_run.h"

using gpuleak::analyzer::build_reports;
using gpuleak::analyzer::ModelDetail;
using gpuleak::analyzer::ReportOptions;
using gpuleak::analyzer::ReportSet;

namespace fs = std::filesystem;

namespace {

constexpr size_t kAllWhole = std::numeric_limits<size_t>::max();

// What `renderer` writes of `traces`, the reports kept whole or as summaries.
std::string rendered(const gpuleak::analyzer::Renderer& renderer, const std::vector<std::string>& traces,
                     size_t kept_whole) {
    ReportSet reports = build_reports(traces, {}, renderer.detail, {}, kept_whole);
    CHECK(reports.summarized() == (kept_whole == 0));
    std::string out;
    std::vector<std::string> warnings;
    renderer.render(
        reports, ReportOptions{}, [&](std::string_view part) { out += part; }, warnings);
    return out;
}

// Two ranks that touch device 0 before they pick their own (a device shared, a job), the second recorded
// without stacks (as when the stack table is full: its sites' stack is 0), a worker its parent forked, a
// process that ran out of memory and one killed.
std::vector<std::string> mixed_run(const TempDir& dir) {
    std::vector<std::string> traces;
    for (const char* rank : {"0", "1"}) {
        RunOptions options;
        options.environment = {std::string("RANK=") + rank, std::string("LOCAL_RANK=") + rank, "WORLD_SIZE=2",
                               "GPULEAK_SIM_DEVICES=2"};
        if (std::string_view(rank) == "1")
            options.environment.emplace_back("GPULEAK_STACK_DEPTH=0");
        TracedRun run = run_traced(dir, program_path("scenario_rank_device"), {}, options);
        REQUIRE(run.exited_with(0));
    }
    TracedRun worker = run_traced(dir, program_path("scenario_worker_leak"), {});
    REQUIRE(worker.exited_with(0));
    RunOptions small;
    small.environment = {"GPULEAK_SIM_CAPACITY=64MiB"};
    REQUIRE(run_traced(dir, program_path("scenario_oom"), {}, small).exited_with(0));
    RunOptions killed;
    killed.kill_after = std::chrono::milliseconds(400);
    REQUIRE(run_traced(dir, program_path("scenario_killed"), {}, killed).killed_by(SIGKILL));
    return worker.traces();
}

} // namespace

TEST_CASE("a report of many processes made again a process at a time says what the report kept whole says") {
    TempDir dir;
    const std::vector<std::string> traces = mixed_run(dir);
    REQUIRE(traces.size() == 6);
    const std::string text = rendered(*gpuleak::analyzer::find_renderer("text"), traces, kAllWhole);
    // What the run's tables say across processes is in it: the job, the device all of them used, the
    // worker's parent.
    CHECK_THAT(text, Catch::Contains("Device 0 was used by 6 processes"));
    CHECK_THAT(text, Catch::Contains("2 ranks of 2"));
    CHECK_THAT(text, Catch::Contains("6 processes:"));
    for (const gpuleak::analyzer::Renderer& renderer : gpuleak::analyzer::renderers()) {
        INFO(renderer.name);
        CHECK(rendered(renderer, traces, 0) == rendered(renderer, traces, kAllWhole));
    }
}

TEST_CASE("a summary keeps none of its process's timelines, and its whole report has them again") {
    TempDir dir;
    const std::vector<std::string> traces = mixed_run(dir);
    ReportSet reports = build_reports(traces, {}, ModelDetail::Allocations, {}, 0);
    for (size_t i = 0; i < reports.size(); ++i) {
        const gpuleak::analyzer::ProcessModel& summary = reports.all()[i].model;
        CHECK(summary.timeline.empty());
        CHECK(summary.live_allocations.empty());
        const gpuleak::analyzer::ProcessModel& whole = reports.whole(i).model;
        CHECK_FALSE(whole.timeline.empty());
        CHECK(whole.role.kind == summary.role.kind);
    }
}

TEST_CASE("a trace that changed between the readings of a report is said so, one that went is refused") {
    TempDir dir;
    std::vector<std::string> traces = mixed_run(dir);
    ReportSet reports = build_reports(traces, {}, ModelDetail::Summary, {}, 0);
    // Another process's recording under the first one's name.
    fs::copy_file(traces[1], traces[0], fs::copy_options::overwrite_existing);
    const std::string text = gpuleak::analyzer::render_text(reports, ReportOptions{});
    CHECK_THAT(text, Catch::Contains("the trace changed while the report was written"));

    fs::remove(traces.back());
    CHECK_THROWS_AS(gpuleak::analyzer::render_text(reports, ReportOptions{}), gpuleak::analyzer::TraceError);
}
