// gpuleak-report reads the stacks' debug info on a second thread while it builds each process's model
// (build_reports' read_ahead): the report must be the one built reading it as needed, whatever the
// thread had read when the model was done.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "read/trace_error.h"
#include "render/render_json.h"
#include "render/render_text.h"
#include "report/report_builder.h"
#include "traced_run.h"

using gpuleak::analyzer::build_reports;
using gpuleak::analyzer::ProcessReport;
using gpuleak::analyzer::ReportOptions;

namespace fs = std::filesystem;

namespace {

// The text report followed by the JSON one.
std::string rendered(const std::vector<std::string>& traces, const std::string& debuginfo_path,
                     bool read_ahead) {
    gpuleak::analyzer::ReportSet reports = build_reports(traces, {debuginfo_path, {}, read_ahead, {}});
    const ReportOptions options;
    return gpuleak::analyzer::render_text(reports, options) +
           gpuleak::analyzer::render_json(reports, options).dump(2);
}

void check_same_report(const std::vector<std::string>& traces, const std::string& debuginfo_path = {}) {
    const std::string as_needed = rendered(traces, debuginfo_path, false);
    // Several times: where the read-ahead is stopped depends on how fast each thread went.
    for (int attempt = 0; attempt < 3; ++attempt)
        CHECK(rendered(traces, debuginfo_path, true) == as_needed);
}

} // namespace

TEST_CASE("reading debug info ahead leaves the report of several processes and a failure as it was") {
    TempDir dir;
    TracedRun worker = run_traced(dir, program_path("scenario_worker_leak"), {});
    REQUIRE(worker.exited_with(0));
    REQUIRE(worker.traces().size() == 2);
    TempDir oom_dir;
    RunOptions options;
    options.environment = {"GPULEAK_SIM_CAPACITY=64MiB"};
    TracedRun oom = run_traced(oom_dir, program_path("scenario_oom"), {}, options);
    REQUIRE(oom.exited_with(0));
    std::vector<std::string> traces = worker.traces();
    const std::vector<std::string> oom_traces = oom.traces();
    traces.insert(traces.end(), oom_traces.begin(), oom_traces.end());

    check_same_report(traces);
    TempDir no_debug_files;
    check_same_report(traces, no_debug_files.path());
}

TEST_CASE("reading debug info ahead leaves frames of programs gone or rebuilt since as they were") {
    TempDir dir;
    const std::string gone = dir.path() + "/gone_program";
    const std::string rebuilt = dir.path() + "/rebuilt_program";
    fs::copy_file(program_path("scenario_leak"), gone);
    fs::copy_file(program_path("scenario_leak"), rebuilt);
    TempDir gone_dir;
    TracedRun gone_run = run_traced(gone_dir, gone, {"3"});
    REQUIRE(gone_run.exited_with(0));
    TempDir rebuilt_dir;
    TracedRun rebuilt_run = run_traced(rebuilt_dir, rebuilt, {"3"});
    REQUIRE(rebuilt_run.exited_with(0));
    fs::remove(gone);
    // Another program in its place: another build id.
    fs::copy_file(program_path("scenario_stable"), rebuilt, fs::copy_options::overwrite_existing);
    std::vector<std::string> traces = gone_run.traces();
    const std::vector<std::string> rebuilt_traces = rebuilt_run.traces();
    traces.insert(traces.end(), rebuilt_traces.begin(), rebuilt_traces.end());

    const std::string report = rendered(traces, {}, true);
    CHECK(report.find("gone_program+0x") != std::string::npos);
    CHECK(report.find("rebuilt_program+0x") != std::string::npos);
    check_same_report(traces);
}

TEST_CASE("a trace that cannot be read is refused also after one whose debug info was read ahead") {
    TempDir dir;
    TracedRun run = run_traced(dir, program_path("scenario_leak"), {"3"});
    REQUIRE(run.exited_with(0));
    const std::string not_a_trace = dir.path() + "/not_a_trace";
    std::ofstream(not_a_trace) << "not a trace\n";
    std::vector<std::string> traces = run.traces();
    traces.push_back(not_a_trace);

    CHECK_THROWS_AS(build_reports(traces), gpuleak::analyzer::TraceError);
    CHECK_THROWS_AS(build_reports({not_a_trace}), gpuleak::analyzer::TraceError);
}
