// gpuleak-report on scenario programs with known answers: the diagnosis, the bytes, and the function
// and file:line of the call that put the memory there.
#include <catch2/catch.hpp>

#include <csignal>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "scenario_report.h"
#include "traced_run.h"

using nlohmann::json;

namespace {

constexpr uint64_t kMiB = uint64_t{1} << 20;

// Whether `frames` holds a frame of `function` at `source`:`line` (inlined frames count).
bool names_site(const json& frames, const std::string& function, const std::string& source, uint32_t line) {
    for (const json& frame : frames) {
        const std::string file = frame["file"];
        if (frame["function"].get<std::string>().find(function) != std::string::npos &&
            file.size() >= source.size() &&
            file.compare(file.size() - source.size(), source.size(), source) == 0 && frame["line"] == line)
            return true;
    }
    return false;
}

json only_process(const json& report) {
    REQUIRE(report["schema"] == "gpuleak-report/1");
    REQUIRE(report["processes"].size() == 1);
    return report["processes"][0];
}

} // namespace

TEST_CASE("a per-iteration leak is diagnosed as a leak at the line that keeps the memory") {
    TempDir dir;
    TracedRun run = run_traced(dir, program_path("scenario_leak"), {"20"});
    REQUIRE(run.exited_with(0));
    json process = only_process(report_json(dir, run.traces()));
    CHECK(process["diagnosis"]["kind"] == "leak");
    CHECK(process["ended"]["how"] == "exit");
    CHECK(process["simulated"] == true);
    CHECK(process["summary"]["final_allocated_bytes"] == 52 * kMiB); // weights + 20 x 1 MiB
    CHECK(process["summary"]["peak_reserved_bytes"] == 59 * kMiB);   // + 19 kept + one 8 MiB step in flight

    const json& leaks = process["leaks"];
    REQUIRE(leaks.size() >= 2);
    // The weights are the largest, but made once: not growing. The history is the leak.
    CHECK(leaks[0]["bytes"] == 32 * kMiB);
    CHECK(leaks[0]["growing"] == false);
    CHECK(names_site(leaks[0]["frames"], "main", "scenario_leak.cpp",
                     line_of("scenario_leak.cpp", "weights site")));
    CHECK(leaks[1]["bytes"] == 20 * kMiB);
    CHECK(leaks[1]["count"] == 20);
    CHECK(leaks[1]["growing"] == true);
    CHECK(leaks[1]["first_marker"] == "iteration 0");
    CHECK(leaks[1]["last_marker"] == "iteration 19");
    CHECK(names_site(leaks[1]["frames"], "keep_history", "scenario_leak.cpp",
                     line_of("scenario_leak.cpp", "leak site")));
    CHECK(process["diagnosis"]["text"].get<std::string>().find("keep_history") != std::string::npos);
    // Only the history grows.
    REQUIRE(process["growth"].size() == 1);
    CHECK(process["growth"][0]["bytes"] == 20 * kMiB);
    CHECK(process["growth"][0]["bytes_per_marker_interval"].get<double>() == Approx(1.0 * kMiB));
}

TEST_CASE("with --live-blocks the report lists where each site's live allocations are, for gpuleak.why()") {
    TempDir dir;
    TracedRun run = run_traced(dir, program_path("scenario_leak"), {"20"});
    REQUIRE(run.exited_with(0));
    CHECK_FALSE(only_process(report_json(dir, run.traces()))["leaks"][1].contains("blocks"));
    RunOptions options;
    options.preload = false;
    TracedRun report =
        run_traced(dir, GPULEAK_REPORT, {"--format", "json", "--live-blocks", run.traces().at(0)}, options);
    REQUIRE(report.exited_with(0));
    const json history = only_process(json::parse(report.out))["leaks"][1];
    REQUIRE(history["blocks"].size() == 20);
    uint64_t previous_end = 0;
    for (const json& block : history["blocks"]) {
        const uint64_t address = block[0];
        CHECK(block[1] == kMiB);
        // By address, none overlapping another.
        CHECK(address >= previous_end);
        previous_end = address + kMiB;
    }
}

TEST_CASE("the verdict and the top site are the same at any speed, with idling before and after the loop") {
    const int step_ms = GENERATE(0, 10, 200);
    const int idle_ms = GENERATE(0, 2000);
    const std::string program = GENERATE(std::string("scenario_leak"), std::string("scenario_stable"));
    INFO(program << " with " << step_ms << " ms steps and " << idle_ms << " ms idle before and after");
    TempDir dir;
    TracedRun run = run_traced(dir, program_path(program),
                               {"10", std::to_string(step_ms), std::to_string(idle_ms), "unmarked"});
    REQUIRE(run.exited_with(0));
    json process = only_process(report_json(dir, run.traces()));
    if (program == "scenario_stable") {
        CHECK(process["diagnosis"]["kind"] == "stable");
        CHECK(process["growth"].empty());
        return;
    }
    CHECK(process["diagnosis"]["kind"] == "leak");
    REQUIRE(process["growth"].size() == 1);
    CHECK(process["growth"][0]["bytes"] == 10 * kMiB);
    CHECK(names_site(process["growth"][0]["frames"], "keep_history", "scenario_leak.cpp",
                     line_of("scenario_leak.cpp", "leak site")));
    // The weights, made once before the idling, are never growing.
    CHECK(process["leaks"][0]["bytes"] == 32 * kMiB);
    CHECK(process["leaks"][0]["growing"] == false);
}

TEST_CASE("each device's memory over time is its own, beside what its driver said was used there") {
    TempDir dir;
    RunOptions two_devices;
    two_devices.environment = {"GPULEAK_SIM_DEVICES=2"};
    // Steps of 2 ms: the frees of cuda:1's buffers with cuda:0 current come after the driver may be
    // asked again.
    TracedRun run = run_traced(dir, program_path("scenario_two_devices"), {"20", "2"}, two_devices);
    REQUIRE(run.exited_with(0));
    json process = only_process(report_json(dir, run.traces()));
    CHECK(process["diagnosis"]["kind"] == "leak");
    REQUIRE(!process["growth"].empty());
    CHECK(names_site(process["growth"][0]["frames"], "keep_history", "scenario_two_devices.cpp",
                     line_of("scenario_two_devices.cpp", "leak site")));
    const json& devices = process["summary"]["devices"];
    REQUIRE(devices.size() == 2);
    // cuda:0: 48 MiB of weights and an 8 MiB step; cuda:1: 16 MiB of weights, 19 kept and a 4 MiB step,
    // then 20 kept.
    const std::pair<uint64_t, uint64_t> peak_and_end[] = {{56 * kMiB, 48 * kMiB}, {39 * kMiB, 36 * kMiB}};
    for (int device = 0; device < 2; ++device) {
        const json& summary = devices[device];
        INFO("cuda:" << device);
        CHECK(summary["device"] == device);
        CHECK(summary["peak_reserved_bytes"] == peak_and_end[device].first);
        CHECK(summary["final_reserved_bytes"] == peak_and_end[device].second);
        const json& timeline = summary["timeline"];
        REQUIRE(!timeline.empty());
        uint64_t highest_reserved = 0;
        uint64_t highest_allocated = 0;
        for (const json& point : timeline) {
            highest_reserved = std::max(highest_reserved, point["reserved_bytes"].get<uint64_t>());
            highest_allocated = std::max(highest_allocated, point["allocated_bytes"].get<uint64_t>());
        }
        CHECK(highest_reserved == peak_and_end[device].first);
        CHECK(highest_allocated == peak_and_end[device].first);
        CHECK(timeline.back()["reserved_bytes"] == peak_and_end[device].second);
        CHECK(timeline.back()["allocated_bytes"] == peak_and_end[device].second);
        // The simulated driver counts what the program holds on that device, and nothing of the other's
        // (cuda:0's is more than cuda:1 ever holds), also when cuda:1's memory is freed with cuda:0
        // current.
        const json& used = summary["driver_used"];
        REQUIRE(!used.empty());
        for (const json& point : used) {
            CHECK(point["bytes"].get<uint64_t>() >= 16 * kMiB);
            CHECK(point["bytes"].get<uint64_t>() <= peak_and_end[device].first);
            CHECK(point["bytes"].get<uint64_t>() <= summary["peak_driver_used_bytes"].get<uint64_t>());
        }
    }
    // The process's timeline sums the devices, and says at its samples what the drivers said, together.
    uint64_t highest = 0;
    bool said = false;
    for (const json& point : process["timeline"]) {
        highest = std::max(highest, point["reserved_bytes"].get<uint64_t>());
        said |= !point["device_used_bytes"].is_null();
    }
    CHECK(highest == 56 * kMiB + 35 * kMiB); // cuda:0's last step, while cuda:1 holds 16 + 19 MiB
    CHECK(said);
}

TEST_CASE("a stable run is not called a leak") {
    TempDir dir;
    TracedRun run = run_traced(dir, program_path("scenario_stable"), {"20"});
    REQUIRE(run.exited_with(0));
    json process = only_process(report_json(dir, run.traces()));
    CHECK(process["diagnosis"]["kind"] == "stable");
    CHECK(process["summary"]["final_reserved_bytes"] == 0);
    CHECK(process["summary"]["peak_reserved_bytes"] == 48 * kMiB);
    CHECK(process["leaks"].empty());
}

TEST_CASE("device memory the program never wrote is not taken off its host memory on the simulated device") {
    TempDir dir;
    // 32 MiB of weights and 16 MiB a step, none of it written: no page of it is resident, while the
    // program's own host memory (its libraries, its heap) is a few MiB.
    TracedRun run = run_traced(dir, program_path("scenario_stable"), {"20", "25"});
    REQUIRE(run.exited_with(0));
    json process = only_process(report_json(dir, run.traces()));
    const json& timeline = process["host"]["timeline"];
    REQUIRE(timeline.size() >= 2);
    for (const json& point : timeline) {
        INFO(point.dump());
        CHECK(point["rss_bytes"].get<uint64_t>() >= kMiB);
        CHECK(point["simulated_device_bytes"].get<uint64_t>() < kMiB);
    }
}

TEST_CASE("memory the driver counts but no allocation call made is held outside the allocators") {
    TempDir dir;
    RunOptions options;
    // A context that takes 1 GiB for itself, as real ones take hundreds of MiB.
    options.environment = {"GPULEAK_SIM_CONTEXT_BYTES=1GiB"};
    TracedRun run = run_traced(dir, program_path("scenario_stable"), {"20"}, options);
    REQUIRE(run.exited_with(0));
    json process = only_process(report_json(dir, run.traces()));
    CHECK(process["diagnosis"]["kind"] == "outside_allocators");
    const json& device = process["summary"]["devices"][0];
    CHECK(device["capacity_bytes"] == 16 * 1024 * kMiB);
    CHECK(device["peak_driver_used_bytes"].get<uint64_t>() >= 1024 * kMiB + 32 * kMiB);
    CHECK(device["peak_reserved_bytes"] == 48 * kMiB);
}

TEST_CASE("a caching allocator whose reserved grows while allocated stays flat is cache growth") {
    TempDir dir;
    TracedRun run = run_traced(dir, program_path("scenario_cache_growth"), {"20"});
    REQUIRE(run.exited_with(0));
    json process = only_process(report_json(dir, run.traces()));
    CHECK(process["diagnosis"]["kind"] == "cache_growth");
    const json& summary = process["summary"];
    CHECK(summary["allocator_reports_blocks"] == true);
    CHECK(summary["final_reserved_bytes"] == 270 * kMiB); // segments of 4..23 MiB
    CHECK(summary["final_allocated_bytes"] == 1 * kMiB);
    CHECK(summary["peak_allocated_bytes"] == 23 * kMiB);
    CHECK(process["diagnosis"]["text"].get<std::string>().find("expandable_segments") != std::string::npos);
}

TEST_CASE("an out-of-memory failure is shown with its size and line and what was held then") {
    TempDir dir;
    RunOptions options;
    options.environment = {"GPULEAK_SIM_CAPACITY=64MiB"};
    TracedRun run = run_traced(dir, program_path("scenario_oom"), {}, options);
    REQUIRE(run.exited_with(0));
    json process = only_process(report_json(dir, run.traces()));
    REQUIRE(process["failures"].size() == 1);
    const json& failure = process["failures"][0];
    CHECK(failure["bytes"] == 16 * kMiB);
    CHECK(failure["error"] == 2);
    CHECK(failure["reserved_bytes_then"] == 64 * kMiB);
    CHECK(failure["free_bytes"] == 0); // per the driver, at that moment
    const json& device = process["summary"]["devices"][0];
    CHECK(device["capacity_bytes"] == 64 * kMiB);
    CHECK(device["lowest_free_bytes"] == 0);
    CHECK(names_site(failure["frames"], "grab", "scenario_oom.cpp", line_of("scenario_oom.cpp", "oom site")));
    REQUIRE(!failure["top_sites_then"].empty());
    CHECK(failure["top_sites_then"][0]["bytes"] == 64 * kMiB);
    CHECK(process["summary"]["failed_allocations"] == 1);
    CHECK(process["diagnosis"]["text"].get<std::string>().find("failed") != std::string::npos);
}

TEST_CASE(
    "an allocator's refusal under its own cap is an out-of-memory failure with its line and free bytes") {
    TempDir dir;
    RunOptions options;
    options.environment = {"GPULEAK_SIM_CAPACITY=256MiB"};
    TracedRun run = run_traced(dir, program_path("scenario_allocator_oom"), {"cap"}, options);
    REQUIRE(run.exited_with(0));
    json process = only_process(report_json(dir, run.traces()));
    REQUIRE(process["failures"].size() == 1);
    const json& failure = process["failures"][0];
    CHECK(failure["source"] == "allocator");
    CHECK(failure["kind"] == "block");
    CHECK(failure["bytes"] == 32 * kMiB);
    CHECK(failure["error"] == -1);
    CHECK(failure["failed_cuda_allocations"] == 0);
    CHECK(failure["free_bytes"] == 208 * kMiB); // as the allocator saw it: the device was not full
    CHECK(failure["reserved_bytes_then"] == 48 * kMiB);
    const uint32_t refusal = line_of("scenario_allocator_oom.cpp", "refusal site");
    // Innermost first: past the inline helper of gpuleak.h, the call that refused.
    const json& frames = failure["frames"];
    size_t first = 0;
    while (first < frames.size() && frames[first]["file"].get<std::string>().ends_with("gpuleak.h"))
        ++first;
    REQUIRE(first < frames.size());
    CHECK(names_site(json::array({frames[first]}), "refuse", "scenario_allocator_oom.cpp", refusal));
    REQUIRE(!failure["top_sites_then"].empty());
    CHECK(failure["top_sites_then"][0]["bytes"] == 48 * kMiB);
    CHECK(names_site(failure["top_sites_then"][0]["frames"], "main", "scenario_allocator_oom.cpp",
                     line_of("scenario_allocator_oom.cpp", "held site")));
    CHECK(process["summary"]["failed_allocations"] == 1);
    CHECK(process["diagnosis"]["text"].get<std::string>().find("no CUDA allocation failed") !=
          std::string::npos);

    RunOptions text_options;
    text_options.preload = false;
    TracedRun text = run_traced(dir, GPULEAK_REPORT, run.traces(), text_options);
    REQUIRE(text.exited_with(0));
    INFO(text.out);
    CHECK(text.out.find("#1 32.0 MiB of block memory on device 0") != std::string::npos);
    // The failure's line is wrapped at 100 columns: its words are what count.
    std::string words;
    std::istringstream stream(text.out);
    for (std::string word; stream >> word;)
        words += (words.empty() ? "" : " ") + word;
    CHECK(words.find("out of memory (allocator refused; no CUDA allocation failed), 208.0 MiB free") !=
          std::string::npos);
    CHECK(text.out.find("scenario_allocator_oom.cpp:" + std::to_string(refusal)) != std::string::npos);
    const size_t failures = text.out.find("Failed allocations");
    REQUIRE(failures != std::string::npos);
    CHECK(text.out.find("#2 ", failures) == std::string::npos);
}

TEST_CASE("an allocator that gives up after failed cudaMallocs makes one out-of-memory failure, not three") {
    TempDir dir;
    RunOptions options;
    options.environment = {"GPULEAK_SIM_CAPACITY=64MiB"};
    TracedRun run = run_traced(dir, program_path("scenario_allocator_oom"), {"device"}, options);
    REQUIRE(run.exited_with(0));
    json process = only_process(report_json(dir, run.traces()));
    REQUIRE(process["failures"].size() == 1);
    const json& failure = process["failures"][0];
    CHECK(failure["source"] == "allocator");
    CHECK(failure["bytes"] == 32 * kMiB);
    CHECK(failure["failed_cuda_allocations"] == 2);
    CHECK(failure["error"] == 2); // the cudaMalloc's
    CHECK(failure["free_bytes"] == 0);
    CHECK(failure["reserved_bytes_then"] == 64 * kMiB);
    CHECK(names_site(failure["frames"], "refuse", "scenario_allocator_oom.cpp",
                     line_of("scenario_allocator_oom.cpp", "refusal site")));
    CHECK(process["summary"]["failed_allocations"] == 1);
    CHECK(process["diagnosis"]["text"].get<std::string>().find("1 allocation failed") != std::string::npos);
}

TEST_CASE("a process killed with SIGKILL is reported as killed with its leak") {
    TempDir dir;
    RunOptions options;
    options.kill_after = std::chrono::milliseconds(400);
    TracedRun run = run_traced(dir, program_path("scenario_killed"), {}, options);
    REQUIRE(run.killed_by(SIGKILL));
    json process = only_process(report_json(dir, run.traces()));
    CHECK(process["ended"]["how"] == "killed");
    CHECK(process["diagnosis"]["kind"] == "leak");
    REQUIRE(!process["leaks"].empty());
    const json& leak = process["leaks"][0];
    CHECK(leak["count"].get<uint64_t>() >= 5);
    CHECK(leak["bytes"] == leak["count"].get<uint64_t>() * 3 * kMiB);
    CHECK(names_site(leak["frames"], "hold_buffer", "scenario_killed.cpp",
                     line_of("scenario_killed.cpp", "killed leak site")));
}

TEST_CASE("a forked worker that leaks is found from its parent's trace and diagnosed apart") {
    TempDir dir;
    TracedRun run = run_traced(dir, program_path("scenario_worker_leak"), {});
    REQUIRE(run.exited_with(0));
    REQUIRE(run.traces().size() == 2);
    // Named alone, the parent's trace brings its child's along.
    std::string parent_trace;
    for (const std::string& trace : run.traces()) {
        json single = report_json(dir, {trace});
        if (single["processes"].size() == 2)
            parent_trace = trace;
    }
    REQUIRE(!parent_trace.empty());
    json report = report_json(dir, {parent_trace});
    const json& parent = report["processes"][0];
    const json& worker = report["processes"][1];
    CHECK(worker["ppid"] == parent["pid"]);
    CHECK(parent["diagnosis"]["kind"] == "stable");
    CHECK(worker["diagnosis"]["kind"] == "leak");
    CHECK(worker["summary"]["final_allocated_bytes"] == 20 * kMiB);
    REQUIRE(!worker["leaks"].empty());
    CHECK(names_site(worker["leaks"][0]["frames"], "worker_keeps_batch", "scenario_worker_leak.cpp",
                     line_of("scenario_worker_leak.cpp", "worker leak site")));
}

TEST_CASE("a device that a process and its worker both used is told with what they held together") {
    TempDir dir;
    TracedRun run = run_traced(dir, program_path("scenario_worker_leak"), {});
    REQUIRE(run.exited_with(0));
    const json report = report_json(dir, run.traces());
    REQUIRE(report["run"]["shared_devices"].size() == 1);
    const json& device = report["run"]["shared_devices"][0];
    CHECK(device["device"] == 0);
    // The parent keeps its 8 MiB of weights until its worker has ended with its 20 MiB, and takes 4 MiB of
    // scratch now and then meanwhile.
    CHECK(device["peak_reserved_bytes"].get<uint64_t>() >= 28 * kMiB);
    CHECK(device["peak_reserved_bytes"].get<uint64_t>() <= 32 * kMiB);
    REQUIRE(device["processes"].size() == 2);
    const json& worker = device["processes"][0];
    const json& parent = device["processes"][1];
    CHECK(worker["peak_reserved_bytes"] == 20 * kMiB);
    CHECK(worker["final_reserved_bytes"] == 20 * kMiB);
    CHECK(parent["peak_reserved_bytes"] == 12 * kMiB);
    CHECK(parent["final_reserved_bytes"] == 0);
    // The parent made the context; its forked worker runs in a copy of it.
    CHECK(parent["context"] == true);
    CHECK(parent["context_site"].get<std::string>().find("main") != std::string::npos);
    CHECK(worker["context"] == false);
    CHECK(device["contexts"] == 1);
    const std::string text = report_output(dir, "text", run.traces());
    CHECK(text.find("Device 0 was used by 2 processes: together they reserved at most ") !=
          std::string::npos);
}

TEST_CASE("a second report of a trace takes the frames the first kept and says the same") {
    TempDir dir;
    TracedRun run = run_traced(dir, program_path("scenario_leak"), {"5"});
    REQUIRE(run.exited_with(0));
    const std::string cache = dir.path() + "/symbol-cache";
    RunOptions options;
    options.preload = false;
    options.environment = {"GPULEAK_CACHE_DIR=" + cache};
    std::vector<std::string> arguments{"--format", "json", "--no-symbol-cache", run.traces().at(0)};

    const TracedRun uncached = run_traced(dir, GPULEAK_REPORT, arguments, options);
    REQUIRE(uncached.exited_with(0));
    CHECK_FALSE(std::filesystem::exists(cache));

    arguments.erase(arguments.begin() + 2);
    const TracedRun first = run_traced(dir, GPULEAK_REPORT, arguments, options);
    REQUIRE(first.exited_with(0));
    REQUIRE(std::filesystem::exists(cache));
    CHECK_FALSE(std::filesystem::is_empty(cache));
    const TracedRun second = run_traced(dir, GPULEAK_REPORT, arguments, options);
    REQUIRE(second.exited_with(0));
    CHECK(first.out == uncached.out);
    CHECK(second.out == uncached.out);
    CHECK(second.err == uncached.err);
}

namespace {

// scenario_many_live's figures for `steps` steps: what the program itself holds at the end.
struct ManyLive {
    uint64_t steps;
    [[nodiscard]] uint64_t kept_allocations() const { return (steps + 15) / 16; }
    [[nodiscard]] uint64_t blocks_bytes() const { return steps * (512 + 1024); }
    [[nodiscard]] uint64_t reserved_bytes() const { return blocks_bytes() + 4096 + kept_allocations() * 256; }
};

const json* site_with(const json& leaks, const std::string& kind, uint64_t bytes) {
    for (const json& leak : leaks)
        if (leak["kind"] == kind && leak["bytes"] == bytes)
            return &leak;
    return nullptr;
}

// Totals and sites exact, whatever part of them the live table holds one by one.
void check_many_live(const json& process, const ManyLive& expected) {
    const json& summary = process["summary"];
    CHECK(summary["final_allocated_bytes"] == expected.blocks_bytes());
    // The last step's temporary, before it kept its two blocks.
    CHECK(summary["peak_allocated_bytes"] == expected.blocks_bytes() - 1536 + 4096);
    CHECK(summary["final_reserved_bytes"] == expected.reserved_bytes());
    CHECK(summary["peak_reserved_bytes"] == expected.reserved_bytes());
    CHECK(process["diagnosis"]["kind"] == "leak");
    const json& leaks = process["leaks"];
    const json* losses = site_with(leaks, "block", expected.steps * 512);
    const json* metrics = site_with(leaks, "block", expected.steps * 1024);
    const json* kept = site_with(leaks, "device", expected.kept_allocations() * 256);
    REQUIRE(losses != nullptr);
    REQUIRE(metrics != nullptr);
    REQUIRE(kept != nullptr);
    CHECK((*losses)["count"] == expected.steps);
    CHECK((*metrics)["count"] == expected.steps);
    CHECK((*kept)["count"] == expected.kept_allocations());
    CHECK((*losses)["growing"] == true);
    CHECK((*metrics)["growing"] == true);
    // The call may be a tail call: the loop's line, if not keep_loss's own.
    const bool named = names_site((*losses)["frames"], "main", "scenario_many_live.cpp",
                                  line_of("scenario_many_live.cpp", "loss call")) ||
                       names_site((*losses)["frames"], "keep_loss", "scenario_many_live.cpp",
                                  line_of("scenario_many_live.cpp", "loss site"));
    CHECK(named);
    const json& exactness = summary["exactness"];
    CHECK(exactness["untracked"] == 0);
    CHECK(exactness["unattributed"] == 0);
}

// scenario_many_live run to its end, with `environment`, and its report's process.
json many_live_process(const TempDir& dir, const ManyLive& run_for,
                       const std::vector<std::string>& environment = {}) {
    RunOptions options;
    options.environment = environment;
    TracedRun run =
        run_traced(dir, program_path("scenario_many_live"), {std::to_string(run_for.steps)}, options);
    REQUIRE(run.exited_with(0));
    return only_process(report_json(dir, run.traces()));
}

} // namespace

TEST_CASE("a million live allocations at the default trace size are each tracked, and counted exactly") {
    TempDir dir;
    const ManyLive expected{500000};
    const json process = many_live_process(dir, expected);
    check_many_live(process, expected);
    CHECK(process["summary"]["exactness"]["spilled"] == 0);
    CHECK(process["summary"]["exactness"]["notes"].empty());
}

TEST_CASE("ten million live allocations at the default trace size are counted exactly, the excess by site") {
    TempDir dir;
    const ManyLive expected{5000000};
    const json process = many_live_process(dir, expected);
    check_many_live(process, expected);
    const json& exactness = process["summary"]["exactness"];
    // What the live table holds one by one, and the rest by site: the report says which is which.
    CHECK(exactness["live_capacity"].get<uint64_t>() >= 3'000'000);
    CHECK(exactness["spilled"].get<uint64_t>() + exactness["live_capacity"].get<uint64_t>() >=
          2 * expected.steps + expected.kept_allocations());
    CHECK(exactness["notes"].size() == 1);
}

TEST_CASE("a million live allocations in the smallest trace are counted exactly, the excess by site") {
    TempDir dir;
    const ManyLive expected{500000};
    const json process = many_live_process(dir, expected, {"GPULEAK_MAX_MB=4"});
    check_many_live(process, expected);
    CHECK(process["summary"]["exactness"]["spilled"].get<uint64_t>() > 900000);

    // The text says so beside the figures, before the diagnosis.
    RunOptions plain;
    plain.preload = false;
    TracedRun text = run_traced(dir, GPULEAK_REPORT, {process["trace"].get<std::string>()}, plain);
    REQUIRE(text.exited_with(0));
    const size_t note = text.out.find("not exact");
    REQUIRE(note != std::string::npos);
    CHECK(note < text.out.find("Diagnosis:"));
    CHECK(text.out.find("counted by site only") != std::string::npos);
}

TEST_CASE("a process killed while its live set is past the live table's slots reads back with exact totals") {
    TempDir dir;
    const ManyLive expected{100000};
    RunOptions options;
    options.environment = {"GPULEAK_MAX_MB=4"};
    TracedRun run = run_traced(dir, program_path("scenario_many_live"),
                               {std::to_string(expected.steps), "kill"}, options);
    REQUIRE(run.killed_by(SIGKILL));
    const json process = only_process(report_json(dir, run.traces()));
    CHECK(process["ended"]["how"] == "killed");
    check_many_live(process, expected);
    CHECK(process["summary"]["exactness"]["spilled"].get<uint64_t>() > 100000);
}

namespace {

RunOptions quiet() {
    RunOptions options;
    options.environment = {"GPULEAK_QUIET=1"};
    return options;
}

// scenario_host_memory's parent and worker, from the report of the run's traces.
struct HostRun {
    json parent;
    json worker;
};

HostRun host_run(const TempDir& dir, const std::string& mode, int step_ms) {
    TracedRun run =
        run_traced(dir, program_path("scenario_host_memory"), {mode, std::to_string(step_ms)}, quiet());
    INFO(run.err);
    REQUIRE(run.exited_with(0));
    REQUIRE(run.traces().size() == 2);
    const json report = report_json(dir, run.traces());
    REQUIRE(report["processes"].size() == 2);
    HostRun result{report["processes"][0], report["processes"][1]};
    if (result.worker["ppid"] != result.parent["pid"])
        std::swap(result.parent, result.worker);
    REQUIRE(result.worker["ppid"] == result.parent["pid"]);
    return result;
}

uint64_t bytes_of(const json& value) {
    return value.is_null() ? 0 : value.get<uint64_t>();
}

} // namespace

TEST_CASE("a forked worker's copies of its parent's pages are told from its own allocations, at any pace") {
    struct Expected {
        std::string mode;
        std::vector<int> step_ms;
        std::string cause; // empty: no growth
    };
    // Copies are the worker's own however fast they came; growth is judged on the worker's work, so a
    // one-time allocation at its start is not growth.
    const Expected cases[] = {{"cow", {0, 50, 200}, "copy_on_write"},
                              {"grow", {50, 200}, "allocations"},
                              {"shm", {50, 200}, "shared_memory"},
                              {"read", {0, 200}, ""},
                              {"once", {50, 200}, ""}};
    for (const Expected& expected : cases) {
        for (int step_ms : expected.step_ms) {
            INFO(expected.mode << " with steps of " << step_ms << " ms");
            TempDir dir;
            const HostRun run = host_run(dir, expected.mode, step_ms);
            const json& worker = run.worker;
            CHECK(worker["host_only"] == true);
            CHECK(worker["role"]["kind"] == "forked_child");
            CHECK(worker["ended"]["how"] == "exit");
            CHECK(worker["host"]["timeline"].size() >= 2);
            // The parent used the GPU and holds its dataset from before its first event: not growth.
            CHECK(run.parent["host_only"] == false);
            CHECK(run.parent["diagnosis"]["host"].is_null());
            const json& host = worker["diagnosis"]["host"];
            if (expected.cause.empty()) {
                CHECK(worker["diagnosis"]["kind"] == "stable");
                CHECK(host.is_null());
                continue;
            }
            CHECK(worker["diagnosis"]["kind"] == "host_ram_growth");
            REQUIRE(host.is_object());
            CHECK(host["cause"] == expected.cause);
            CHECK(host["growth_bytes"].get<uint64_t>() >= 150 * kMiB);
            if (expected.cause == "copy_on_write") {
                // Its resident memory stayed: the pages were there, shared, from the start.
                CHECK(bytes_of(host["to"]["rss_bytes"]) < bytes_of(host["from"]["rss_bytes"]) + 32 * kMiB);
                CHECK(bytes_of(host["to"]["uss_bytes"]) >= 200 * kMiB);
                CHECK_THAT(host["text"].get<std::string>(), Catch::Contains("numpy arrays or tensors"));
            }
        }
    }
}

TEST_CASE("the text report lists every process with its host memory and what grew") {
    TempDir dir;
    TracedRun run = run_traced(dir, program_path("scenario_host_memory"), {"cow", "0"}, quiet());
    REQUIRE(run.exited_with(0));
    std::vector<std::string> arguments = run.traces();
    RunOptions unpreloaded;
    unpreloaded.preload = false;
    TracedRun report = run_traced(dir, GPULEAK_REPORT, arguments, unpreloaded);
    INFO(report.out);
    REQUIRE(report.exited_with(0));
    CHECK_THAT(report.out, Catch::Contains(" RSS peak  USS peak  diagnosis       host memory   process\n"));
    CHECK_THAT(report.out, Catch::Contains("host_ram_growth copy_on_write forked child"));
    CHECK_THAT(report.out, Catch::Contains("none: the process never used CUDA"));
    CHECK_THAT(report.out, Catch::Contains("copy-on-write"));
}

TEST_CASE("a worker killed by SIGKILL is named with its last samples and the run's largest process then") {
    TempDir dir;
    TracedRun run = run_traced(dir, program_path("scenario_host_memory"), {"kill", "50"}, quiet());
    REQUIRE(run.exited_with(0));
    CHECK_THAT(run.out, Catch::Contains("signal 9"));
    REQUIRE(run.traces().size() == 2);
    const json report = report_json(dir, run.traces());
    const json* worker = nullptr;
    for (const json& process : report["processes"])
        if (process["host_only"] == true)
            worker = &process;
    REQUIRE(worker != nullptr);
    CHECK((*worker)["ended"]["how"] == "killed");
    const json& killed = (*worker)["diagnosis"]["killed"];
    REQUIRE(killed.is_object());
    // Six steps of 16 MiB on top of the 256 MiB it shares with its parent.
    CHECK(bytes_of(killed["last"]["rss_bytes"]) >= 300 * kMiB);
    CHECK(killed["largest_pid"] == (*worker)["pid"]);
    CHECK_THAT(killed["text"].get<std::string>(), Catch::Contains("SIGKILL"));
    CHECK(report["processes"][0]["diagnosis"]["killed"].is_null() !=
          report["processes"][1]["diagnosis"]["killed"].is_null());
}

TEST_CASE("a fork that runs another program leaves no trace, and one whose exec failed keeps its own") {
    TempDir exec_dir;
    TracedRun exec = run_traced(exec_dir, program_path("scenario_host_memory"), {"exec"}, quiet());
    REQUIRE(exec.exited_with(0));
    CHECK(exec.traces().size() == 1);

    TempDir failed_dir;
    const HostRun failed = host_run(failed_dir, "execfail", 50);
    CHECK(failed.worker["ended"]["how"] == "exit");
    CHECK(failed.worker["ended"]["code"] == 0);
}
