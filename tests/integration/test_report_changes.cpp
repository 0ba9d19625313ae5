// gpuleak-report --between MARKER MARKER and --diff BEFORE AFTER: the sites whose live bytes grew or
// shrank, matched by their frames, the largest change first, in text and JSON.
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include "scenario_report.h"
#include "traced_run.h"

using nlohmann::json;

namespace {

constexpr int64_t kMiB = int64_t{1} << 20;

RunOptions not_traced() {
    RunOptions options;
    options.preload = false;
    return options;
}

TracedRun report(const TempDir& dir, const std::vector<std::string>& arguments) {
    return run_traced(dir, GPULEAK_REPORT, arguments, not_traced());
}

json changes_json(const TempDir& dir, std::vector<std::string> arguments) {
    arguments.insert(arguments.begin(), {"--format", "json"});
    TracedRun run = report(dir, arguments);
    INFO(run.err);
    REQUIRE(run.exited_with(0));
    json changes = json::parse(run.out);
    REQUIRE(changes["schema"] == "gpuleak-changes/1");
    return changes;
}

// Whether a change's frames name `function` at the scenario's tagged line.
bool made_at(const json& change, const std::string& function, const std::string& source,
             const std::string& tag) {
    const uint32_t line = line_of(source, tag);
    for (const json& frame : change["frames"])
        if (frame["function"] == function && frame["line"] == line &&
            frame["file"].get<std::string>().ends_with(source))
            return true;
    return false;
}

} // namespace

TEST_CASE("between two markers, the sites that grew are listed with what they held at each") {
    TempDir dir;
    TracedRun run = run_traced(dir, program_path("scenario_leak"), {"20"});
    REQUIRE(run.exited_with(0));
    const std::string trace = run.traces().front();
    const json changes = changes_json(dir, {"--between", "iteration 2", "iteration 9", trace});

    CHECK(changes["before"]["marker"] == "iteration 2");
    CHECK(changes["after"]["marker"] == "iteration 9");
    CHECK(changes["before"]["t_s"].get<double>() < changes["after"]["t_s"].get<double>());
    // The weights and the history kept before each marker; a step's scratch buffer is freed by then.
    CHECK(changes["before"]["bytes"] == 34 * kMiB);
    CHECK(changes["after"]["bytes"] == 41 * kMiB);
    CHECK(changes["change_bytes"] == 7 * kMiB);
    // Only the history changed: the weights, held at both, are left out.
    REQUIRE(changes["changes"].size() == 1);
    const json& history = changes["changes"][0];
    CHECK(history["change_bytes"] == 7 * kMiB);
    CHECK(history["before"] == json{{"bytes", 2 * kMiB}, {"count", 2}});
    CHECK(history["after"] == json{{"bytes", 9 * kMiB}, {"count", 9}});
    CHECK(made_at(history, "keep_history", "scenario_leak.cpp", "leak site"));

    // Backwards, it shrank by as much.
    const json backwards = changes_json(dir, {"--between", "iteration 9", "iteration 2", trace});
    CHECK(backwards["changes"][0]["change_bytes"] == -7 * kMiB);

    // The text says the same, the line first.
    TracedRun text = report(dir, {"--between", "iteration 2", "iteration 9", "--no-color", trace});
    REQUIRE(text.exited_with(0));
    INFO(text.out);
    CHECK(text.out.find("What changed from \"iteration 2\" at ") == 0);
    CHECK(text.out.find("The program held 34.0 MiB, then 41.0 MiB (+7.0 MiB). 1 site grew and 0 shrank") !=
          std::string::npos);
    CHECK(text.out.find("#1 +7.0 MiB: 2.0 MiB in 2 device allocations then, 9.0 MiB in 9 device allocations "
                        "now\n        keep_history  scenario_leak.cpp:" +
                        std::to_string(line_of("scenario_leak.cpp", "leak site"))) != std::string::npos);
}

TEST_CASE("two runs' ends are compared site by site, matched by their frames") {
    TempDir before_dir;
    TempDir after_dir;
    TracedRun before = run_traced(before_dir, program_path("scenario_leak"), {"5"});
    TracedRun after = run_traced(after_dir, program_path("scenario_leak"), {"20"});
    REQUIRE(before.exited_with(0));
    REQUIRE(after.exited_with(0));
    // A directory stands for the process that started first in it.
    const json changes = changes_json(before_dir, {"--diff", before_dir.path(), after.traces().front()});
    CHECK(changes["before"]["pid"] != changes["after"]["pid"]);
    CHECK(changes["before"]["marker"].is_null());
    CHECK(changes["change_bytes"] == 15 * kMiB);
    REQUIRE(changes["changes"].size() == 1);
    CHECK(changes["changes"][0]["before"]["count"] == 5);
    CHECK(changes["changes"][0]["after"]["count"] == 20);
    CHECK(made_at(changes["changes"][0], "keep_history", "scenario_leak.cpp", "leak site"));

    // The same run against itself: nothing changed.
    const json same = changes_json(before_dir, {"--diff", before_dir.path(), before_dir.path()});
    CHECK(same["changes"].empty());
    CHECK(same["change_bytes"] == 0);
}

TEST_CASE("what changed is refused with one line where it cannot be answered") {
    TempDir dir;
    TracedRun run = run_traced(dir, program_path("scenario_leak"), {"3"});
    REQUIRE(run.exited_with(0));
    const std::string trace = run.traces().front();
    const auto refusal = [&](const std::vector<std::string>& arguments) {
        TracedRun refused = report(dir, arguments);
        CHECK(refused.exited_with(2));
        CHECK(refused.out.empty());
        return refused.err;
    };
    CHECK(refusal({"--between", "epoch 1", "iteration 2", trace}) ==
          "gpuleak-report: " + trace +
              ": no marker \"epoch 1\" (its markers: \"iteration 0\", \"iteration 1\", \"iteration 2\")\n");
    CHECK(refusal({"--diff", trace}) ==
          "gpuleak-report: --diff compares two traces: name the one before and the "
          "one after (each a trace file or a directory)\n");
    CHECK(refusal({"--format", "pprof", "-o", dir.path() + "/p.pb.gz", "--diff", trace, trace})
              .starts_with("gpuleak-report: --format pprof cannot show what changed: text, json, html can"));

    // A marker older than the oldest event the ring kept: its state is no longer known.
    TempDir small;
    RunOptions options;
    options.environment = {"GPULEAK_MAX_MB=4"};
    TracedRun long_run = run_traced(small, program_path("scenario_leak"), {"2500"}, options);
    REQUIRE(long_run.exited_with(0));
    const std::string long_trace = long_run.traces().front();
    TracedRun wrapped = report(small, {"--between", "iteration 1", "iteration 2000", long_trace});
    CHECK(wrapped.exited_with(2));
    CHECK(wrapped.err.find(": the event ring no longer reaches back to \"iteration 1\" at ") !=
          std::string::npos);
    // The latest marker whose label the trace had room for, and one seven iterations before it, are within
    // it.
    const json markers = report_json(small, {long_trace})["processes"][0]["markers"];
    int last = 0;
    for (const json& marker : markers)
        if (const std::string label = marker["label"]; label.starts_with("iteration "))
            last = std::max(last, std::stoi(label.substr(10)));
    REQUIRE(last > 2000);
    REQUIRE(last < 2490);
    CHECK(changes_json(small, {"--between", "iteration " + std::to_string(last - 7),
                               "iteration " + std::to_string(last), long_trace})["change_bytes"] == 7 * kMiB);
    TracedRun unlabelled = report(small, {"--between", "iteration 2490", "iteration 2000", long_trace});
    CHECK(unlabelled.err.ends_with(
        "; the trace had no room for all of them: a larger GPULEAK_MAX_MB keeps more)\n"));
}
