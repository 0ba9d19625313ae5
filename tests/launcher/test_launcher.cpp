// gpuleak run: the command runs as it would alone (status, signals, stdout, environment) with every
// process it starts recorded into the run's directory, and the summary and report come out at the end.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cctype>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <sstream>
#include <sys/stat.h>
#include <unistd.h>

#include "traced_run.h"

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// The launcher, started by the test as a user would start it: no LD_PRELOAD of the test's own; the
// simulated device found through LD_LIBRARY_PATH, which the command inherits.
TracedRun launch(const TempDir& dir, const std::vector<std::string>& arguments, RunOptions options = {}) {
    options.preload = false;
    return run_traced(dir, GPULEAK_LAUNCHER, arguments, options);
}

std::vector<std::string> run_directories(const std::string& parent) {
    std::vector<std::string> found;
    for (const auto& entry : fs::directory_iterator(parent))
        if (entry.is_directory() && entry.path().filename().string().rfind("gpuleak-", 0) == 0)
            found.push_back(entry.path().string());
    return found;
}

// The one run directory the launcher made under `parent`.
std::string only_run_directory(const std::string& parent) {
    const std::vector<std::string> found = run_directories(parent);
    REQUIRE(found.size() == 1);
    return found[0];
}

std::vector<std::string> traces_in(const std::string& directory) {
    std::vector<std::string> found;
    for (const auto& entry : fs::directory_iterator(directory))
        if (entry.path().extension() == ".trace")
            found.push_back(entry.path().filename().string());
    std::sort(found.begin(), found.end());
    return found;
}

json report_of(const std::string& directory) {
    std::ifstream file(directory + "/report.json");
    REQUIRE(file.good());
    return json::parse(file);
}

// `gpuleak run -o job -- command` as srun starts it for one of a job's `tasks` on this machine, with
// `extra` variables; it must end normally.
void run_as_srun_task(const TempDir& dir, const std::string& job, int task, int tasks,
                      const std::vector<std::string>& command, const std::vector<std::string>& extra = {}) {
    RunOptions options;
    options.environment = {"SLURM_JOB_ID=81234",
                           "SLURM_STEP_ID=0",
                           "SLURM_NTASKS=" + std::to_string(tasks),
                           "SLURM_PROCID=" + std::to_string(task),
                           "SLURM_LOCALID=" + std::to_string(task),
                           "SLURM_NODEID=0"};
    options.environment.insert(options.environment.end(), extra.begin(), extra.end());
    std::vector<std::string> arguments = {"run", "-o", job, "--"};
    arguments.insert(arguments.end(), command.begin(), command.end());
    TracedRun run = launch(dir, arguments, options);
    INFO(run.err);
    REQUIRE(run.exited_with(0));
}

// What gpuleak-report prints for `arguments`; it must end normally.
std::string report_output(const TempDir& dir, const std::vector<std::string>& arguments) {
    RunOptions plain;
    plain.preload = false;
    TracedRun run = run_traced(dir, GPULEAK_REPORT, arguments, plain);
    INFO(run.err);
    REQUIRE(run.exited_with(0));
    return run.out;
}

// `text` with each run of spaces and line breaks one space: the report wraps its sentences.
std::string squeezed(const std::string& text) {
    std::string out;
    for (const char c : text)
        if (std::isspace(static_cast<unsigned char>(c)) == 0)
            out += c;
        else if (!out.empty() && out.back() != ' ')
            out += ' ';
    return out;
}

std::set<int> reported_pids(const json& report) {
    std::set<int> pids;
    for (const json& process : report["processes"])
        pids.insert(process["pid"].get<int>());
    return pids;
}

// The value of "NAME=" on its own line of the show mode's output.
std::string shown(const std::string& out, const std::string& name) {
    std::istringstream lines(out);
    for (std::string line; std::getline(lines, line);)
        if (line.rfind(name + "=", 0) == 0)
            return line.substr(name.size() + 1);
    return "<unset>";
}

// The launcher's summary with each paragraph on one line: it wraps them at 100 columns, each
// continuation indented under its "gpuleak: ".
std::string unwrapped(std::string text) {
    const std::string continuation = "\n         ";
    for (size_t at = text.find(continuation); at != std::string::npos; at = text.find(continuation, at))
        text.replace(at, continuation.size(), " ");
    return text;
}

bool one_line(const std::string& text) {
    return std::count(text.begin(), text.end(), '\n') == 1 && text.back() == '\n';
}

} // namespace

TEST_CASE("the launcher exits with the command's status and adds nothing to its stdout") {
    for (const int code : {0, 3}) {
        TempDir dir;
        TracedRun run =
            launch(dir, {"run", "--", program_path("launched_command"), "exit", std::to_string(code)});
        INFO(run.err);
        CHECK(run.exited_with(code));
        CHECK(run.out == "hello\n");
        CHECK(run.err.find("launched_command exited with status " + std::to_string(code)) !=
              std::string::npos);
    }
}

TEST_CASE("a command killed by a signal ends the launcher with 128 + the signal's number") {
    TempDir dir;
    TracedRun run =
        launch(dir, {"run", "--", program_path("launched_command"), "raise", std::to_string(SIGTERM)});
    INFO(run.err);
    CHECK(run.exited_with(128 + SIGTERM));
    CHECK(run.err.find("was killed by signal 15 (SIGTERM)") != std::string::npos);
}

TEST_CASE("a command killed by SIGKILL is reported as a probable OOM kill with its last samples") {
    TempDir dir;
    TracedRun run =
        launch(dir, {"run", "--", program_path("launched_command"), "raise", std::to_string(SIGKILL)});
    INFO(run.err);
    CHECK(run.exited_with(128 + SIGKILL));
    const std::string err = unwrapped(run.err);
    CHECK(err.find("launched_command was killed by SIGKILL") != std::string::npos);
    // Confirmed only where this test's cgroup or the kernel log saw an OOM kill; probable otherwise.
    CHECK(err.find("OOM killer") != std::string::npos);
    CHECK(err.find("last samples") != std::string::npos);
    CHECK(err.find("device memory reserved 2.0 MiB") != std::string::npos);
    // The command could not record its end: the launcher did, with what it knows of the sender.
    const json report = report_of(only_run_directory(dir.path()));
    REQUIRE(report["processes"].size() == 1);
    const json& ended = report["processes"][0]["ended"];
    CHECK(ended["how"] == "signal");
    CHECK(ended["signal"] == SIGKILL);
    CHECK(ended["sender"]["written_by"] == "launcher");
    const bool confirmed = err.find("SIGKILL after") != std::string::npos &&
                           err.find("probably the OOM killer") == std::string::npos;
    CHECK(ended["sender"]["kind"] == (confirmed ? "oom_killer" : "unknown"));
    CHECK(ended["text"].get<std::string>().starts_with("killed by signal 9 (SIGKILL) after"));
    CHECK(report["processes"][0]["duration_s"].get<double>() > 0);
}

TEST_CASE("a signal the launcher passed on is said to come from whoever sent it to the launcher") {
    TempDir dir;
    RunOptions options;
    options.signal_on_output = RunOptions::SignalOnOutput{"ready\n", SIGTERM};
    TracedRun run = launch(dir, {"run", "--", program_path("launched_command"), "wait"}, options);
    INFO(run.err);
    CHECK(run.exited_with(128 + SIGTERM));
    const std::string from_test = "sent by pid " + std::to_string(getpid());
    CHECK(unwrapped(run.err).find("was killed by signal 15 (SIGTERM) after") != std::string::npos);
    CHECK(unwrapped(run.err).find(from_test) != std::string::npos);
    const json report = report_of(only_run_directory(dir.path()));
    REQUIRE(report["processes"].size() == 1);
    const json& sender = report["processes"][0]["ended"]["sender"];
    CHECK(sender["kind"] == "process");
    CHECK(sender["pid"] == getpid());
    CHECK(sender["written_by"] == "launcher");
    CHECK_FALSE(sender["parent"].get<bool>());
    CHECK(report["processes"][0]["ended"]["text"].get<std::string>().find(from_test) != std::string::npos);
}

TEST_CASE("SIGINT sent to the launcher reaches a command that traps it") {
    TempDir dir;
    RunOptions options;
    options.signal_on_output = RunOptions::SignalOnOutput{"ready\n", SIGINT};
    TracedRun run = launch(dir, {"run", "--", program_path("launched_command"), "trap"}, options);
    INFO(run.err);
    CHECK(run.exited_with(42));
    CHECK(run.out.find("caught SIGINT from ") != std::string::npos);
    // Sent on by the launcher: the test signalled the launcher alone.
    CHECK(run.out.find("caught SIGINT from " + std::to_string(getpid())) == std::string::npos);
    CHECK(run.err.find("exited with status 42") != std::string::npos);
}

TEST_CASE("a forked worker is traced beside its parent and both are in the run's report") {
    TempDir dir;
    const std::string log = dir.path() + "/log";
    TracedRun run = launch(dir, {"run", "--", program_path("fork_worker"), log, "fork", "exit", "1", "3"});
    INFO(run.err);
    REQUIRE(run.exited_with(3));
    int parent = 0;
    int worker = 0;
    int status = 0;
    std::istringstream lines(read_text(log));
    for (std::string line; std::getline(lines, line);)
        if (line.rfind("child ", 0) == 0)
            std::sscanf(line.c_str(), "child %d %d %d", &parent, &worker, &status);
    REQUIRE(worker != 0);
    const std::string directory = only_run_directory(dir.path());
    CHECK(traces_in(directory).size() == 2);
    CHECK(reported_pids(report_of(directory)) == std::set<int>{parent, worker});
    CHECK(run.err.find("2 processes traced") != std::string::npos);
}

TEST_CASE("an exec'd grandchild is traced and in the run's report") {
    TempDir dir;
    const std::string log = dir.path() + "/log";
    TracedRun run = launch(dir, {"run", "--", program_path("exec_child"), log, "spawn"});
    INFO(run.err);
    REQUIRE(run.exited_with(0));
    int leaf = 0;
    int leaf_parent = 0;
    std::istringstream lines(read_text(log));
    for (std::string line; std::getline(lines, line);)
        if (line.rfind("leaf ", 0) == 0)
            std::sscanf(line.c_str(), "leaf %d %d", &leaf, &leaf_parent);
    REQUIRE(leaf != 0);
    const std::string directory = only_run_directory(dir.path());
    const std::set<int> pids = reported_pids(report_of(directory));
    CHECK(pids.size() == 2);
    CHECK(pids.count(leaf) == 1);
    CHECK(pids.count(leaf_parent) == 1);
}

TEST_CASE("an LD_PRELOAD already set is kept, after libgpuleak.so") {
    TempDir dir;
    const std::string other = program_path("libnext_interposer.so");
    RunOptions options;
    options.environment = {"LD_PRELOAD=" + other};
    TracedRun run = launch(dir, {"run", "--", program_path("launched_command"), "show"}, options);
    INFO(run.err);
    REQUIRE(run.exited_with(0));
    CHECK(shown(run.out, "LD_PRELOAD") == library_path() + ":" + other);
    CHECK(run.out.find("loaded " + library_path() + "\n") != std::string::npos);
    CHECK(run.out.find("loaded " + other + "\n") != std::string::npos);
}

TEST_CASE("a command that cannot be run gets a shell's status and one line") {
    TempDir dir;
    TracedRun missing = launch(dir, {"run", "--", "gpuleak-no-such-command"});
    CHECK(missing.exited_with(127));
    CHECK(missing.err == "gpuleak: gpuleak-no-such-command: command not found\n");
    CHECK(missing.out.empty());

    const std::string not_executable = dir.path() + "/not-executable";
    std::ofstream(not_executable) << "data\n";
    TracedRun refused = launch(dir, {"run", "--", not_executable});
    CHECK(refused.exited_with(126));
    CHECK(one_line(refused.err));
    CHECK(refused.err.find("Permission denied") != std::string::npos);
    // No run took place: no directory is left behind.
    CHECK(run_directories(dir.path()).empty());
}

TEST_CASE("run -o DIR receives the traces and the report") {
    TempDir dir;
    const std::string directory = dir.path() + "/runs/first";
    TracedRun run =
        launch(dir, {"run", "-o", directory, "--", program_path("launched_command"), "exit", "0"});
    INFO(run.err);
    REQUIRE(run.exited_with(0));
    CHECK(traces_in(directory).size() == 1);
    CHECK(fs::exists(directory + "/report.txt"));
    CHECK(report_of(directory)["processes"].size() == 1);
    CHECK(unwrapped(run.err).find("full report: " + directory +
                                  "/report.txt (and report.json, report.html beside it)") !=
          std::string::npos);
    // The page is the report's: its data is the JSON report's, and it needs nothing from elsewhere.
    const std::string page = read_text(directory + "/report.html");
    CHECK(page.starts_with("<!DOCTYPE html>"));
    CHECK(page.find("<script type=\"application/json\" id=\"gpuleak-data\">{") != std::string::npos);
    CHECK(page.find("default-src 'none'") != std::string::npos);
    CHECK(run_directories(dir.path()).empty());

    // A directory that holds anything would mix two runs in one report.
    TracedRun again =
        launch(dir, {"run", "-o", directory, "--", program_path("launched_command"), "exit", "0"});
    CHECK(again.exited_with(125));
    CHECK(one_line(again.err));
    CHECK(again.err.find("not empty") != std::string::npos);
}

TEST_CASE("a job's launches write into one -o DIR without colliding, and the report reads them as one job") {
    TempDir dir;
    const std::string job = dir.path() + "/job";
    // Four of srun's tasks on this machine, each started as `srun gpuleak run -o DIR -- ...` starts it:
    // the first two keep a buffer every step, the others keep nothing.
    constexpr int kTasks = 4;
    for (int task = 0; task < kTasks; ++task)
        run_as_srun_task(dir, job, task, kTasks,
                         {program_path(task < 2 ? "scenario_leak" : "scenario_stable"), "40"});
    std::vector<std::string> parts;
    for (const auto& entry : fs::directory_iterator(job))
        parts.push_back(entry.path().filename().string());
    std::sort(parts.begin(), parts.end());
    REQUIRE(parts.size() == kTasks);
    for (size_t task = 0; task < parts.size(); ++task) {
        CHECK(parts[task].ends_with(".task" + std::to_string(task)));
        // Each launch's own report, of its own processes: nothing reads another machine's traces.
        CHECK(traces_in(job + "/" + parts[task]).size() == 1);
        CHECK(report_of(job + "/" + parts[task])["processes"].size() == 1);
    }
    const json report = json::parse(report_output(dir, {"--format", "json", job}));
    for (const json& process : report["processes"]) {
        CHECK(process["job"] == "81234");
        CHECK(process["role"]["kind"] == "rank");
        CHECK(process["role"]["world_size"] == kTasks);
        CHECK(process["role"]["node_rank"] == 0);
    }
    const json& ranks = report["job"]["ranks"];
    CHECK(report["job"]["id"] == "81234");
    REQUIRE(ranks.size() == kTasks);
    for (int rank = 0; rank < kTasks; ++rank) {
        CHECK(ranks[rank]["rank"] == rank);
        CHECK(ranks[rank]["local_rank"] == rank);
        CHECK(ranks[rank]["devices"] == json::array({0}));
        CHECK(ranks[rank]["diagnosis"] == (rank < 2 ? "leak" : "stable"));
    }
    // The leaking ranks stand apart from their peers, and leak at the same line.
    std::set<int> apart;
    for (const json& rank : report["job"]["apart"])
        apart.insert(rank["rank"].get<int>());
    CHECK(apart == std::set<int>{0, 1});
    REQUIRE(report["job"]["shared_leaks"].size() == 1);
    const json& shared = report["job"]["shared_leaks"][0];
    CHECK(shared["ranks"] == json::array({0, 1}));
    CHECK(shared["site"].get<std::string>().find("keep_history") != std::string::npos);
    CHECK(shared["bytes"] == 2 * 40 * (1 << 20));
    const std::string text = squeezed(report_output(dir, {"--no-color", job}));
    CHECK(text.starts_with("Job 81234, 4 ranks of 4: rank host"));
    CHECK(text.find("2 of 4 ranks leak at ") != std::string::npos);
}

TEST_CASE("a rank that grows far more than its peers, which grow too, is named") {
    TempDir dir;
    const std::string job = dir.path() + "/job";
    // Each iteration keeps 1 MiB: ranks 0 and 1 keep 10 MiB, rank 2 keeps 40 MiB.
    const char* iterations[] = {"10", "10", "40"};
    for (int task = 0; task < 3; ++task)
        run_as_srun_task(dir, job, task, 3, {program_path("scenario_leak"), iterations[task]});
    const json report = json::parse(report_output(dir, {"--format", "json", job}));
    for (const json& rank : report["job"]["ranks"])
        CHECK(rank["leaked_bytes"] == (rank["rank"] == 2 ? 40 : 10) * (1 << 20));
    std::vector<json> growth;
    for (const json& apart : report["job"]["apart"])
        if (apart["by"] == "growth")
            growth.push_back(apart);
    REQUIRE(growth.size() == 1);
    CHECK(growth[0]["rank"] == 2);
    CHECK(growth[0]["bytes"] == 40 * (1 << 20));
    CHECK(growth[0]["peers_median_bytes"] == 10 * (1 << 20));
    CHECK(report["job"]["shared_leaks"][0]["ranks"] == json::array({0, 1, 2}));
    const std::string text = squeezed(report_output(dir, {"--no-color", job}));
    CHECK(text.find("Rank 2 grows apart: where it grows held 40.0 MiB by its end, 4.0x the median of what "
                    "the other ranks' growth held, 10.0 MiB.") != std::string::npos);
}

namespace {

// scenario_rank_device with `arguments` as two Slurm tasks of one machine with a device each: the report
// of the job, where rank 1 touched device 0, rank 0's, in main before it picked its own.
json job_with_rank_on_device_0(const TempDir& dir, const std::vector<std::string>& arguments) {
    const std::string job = dir.path() + "/job";
    std::vector<std::string> command = {program_path("scenario_rank_device")};
    command.insert(command.end(), arguments.begin(), arguments.end());
    for (int task = 0; task < 2; ++task)
        run_as_srun_task(dir, job, task, 2, command, {"GPULEAK_SIM_DEVICES=2"});
    json report = json::parse(report_output(dir, {"--format", "json", job}));
    REQUIRE(report["job"]["intruding"].size() == 1);
    const json& intruder = report["job"]["intruding"][0];
    CHECK(intruder["rank"] == 1);
    CHECK(intruder["device"] == 0);
    CHECK(intruder["owner"] == 0);
    CHECK(intruder["context"] == true);
    CHECK(intruder["first_site"].get<std::string>().find("main") != std::string::npos);
    CHECK(report["job"]["ranks"][1]["devices"] == json::array({0, 1}));
    report["text"] = squeezed(report_output(dir, {"--no-color", job}));
    return report;
}

} // namespace

TEST_CASE("a rank that allocates before it picks its device is named on the device it took from another") {
    TempDir dir;
    const json report = job_with_rank_on_device_0(dir, {});
    // Rank 0's early megabyte is on its own device; rank 1's is on rank 0's.
    CHECK(report["job"]["intruding"][0]["peak_reserved_bytes"] == 1 << 20);
    const std::string text = report["text"];
    CHECK(text.find("Rank 1 made a context and reserved 1.0 MiB on device 0, rank 0's (first at ") !=
          std::string::npos);
    CHECK(text.find("torch.cuda.set_device(local_rank)") != std::string::npos);
}

TEST_CASE("a rank that only made its context on another rank's device is named there") {
    TempDir dir;
    // cudaFree(NULL) makes the context and allocates nothing.
    const json report = job_with_rank_on_device_0(dir, {"context"});
    CHECK(report["job"]["intruding"][0]["peak_reserved_bytes"] == 0);
    for (const json& process : report["processes"]) {
        const int rank = process["role"]["rank"];
        json devices = json::array();
        for (const json& context : process["contexts"]) {
            devices.push_back(context["device"]);
            CHECK(context["uuid"].get<std::string>().starts_with("GPU-"));
        }
        CHECK(devices == (rank == 0 ? json::array({0}) : json::array({0, 1})));
    }
    const std::string text = report["text"];
    CHECK(text.find("Rank 1 made a context on device 0, rank 0's (first at ") != std::string::npos);
}

TEST_CASE("a rank that ran out of memory is named with where it asked") {
    TempDir dir;
    const std::string job = dir.path() + "/job";
    run_as_srun_task(dir, job, 0, 2, {program_path("scenario_stable"), "5"});
    run_as_srun_task(dir, job, 1, 2, {program_path("scenario_oom")}, {"GPULEAK_SIM_CAPACITY=64MiB"});
    const json report = json::parse(report_output(dir, {"--format", "json", job}));
    REQUIRE(report["job"]["failed"].size() == 1);
    const json& failed = report["job"]["failed"][0];
    CHECK(failed["rank"] == 1);
    CHECK(failed["out_of_memory"] == true);
    CHECK(failed["killed"] == false);
    CHECK(failed["failure_site"].is_string());
    const std::string text = squeezed(report_output(dir, {"--no-color", job}));
    CHECK(text.find("Rank 1 ran out of memory at " + failed["failure_site"].get<std::string>() +
                    ": it asked for ") != std::string::npos);
}

TEST_CASE("the machines' reports of a job merged say what reading every trace says of the job") {
    TempDir dir;
    const std::string job = dir.path() + "/job";
    // Three tasks launched apart on one machine: rank 1 makes its context on rank 0's device, rank 2 runs
    // out of memory. Only a merge that reads all three reports can see the first.
    run_as_srun_task(dir, job, 0, 3, {program_path("scenario_rank_device")}, {"GPULEAK_SIM_DEVICES=3"});
    run_as_srun_task(dir, job, 1, 3, {program_path("scenario_rank_device"), "context"},
                     {"GPULEAK_SIM_DEVICES=3"});
    run_as_srun_task(dir, job, 2, 3, {program_path("scenario_oom")},
                     {"GPULEAK_SIM_DEVICES=3", "GPULEAK_SIM_CAPACITY=64MiB"});
    const json direct = json::parse(report_output(dir, {"--format", "json", job}));
    const json merged = json::parse(report_output(dir, {"--merge", "--format", "json", job}));
    CHECK(merged["job"] == direct["job"]);
    CHECK(merged["run"]["shared_devices"] == direct["run"]["shared_devices"]);
    REQUIRE(merged["processes"].size() == 3);
    CHECK(merged["job"]["intruding"].size() == 1);
    CHECK(merged["job"]["failed"].size() == 1);
    // Each run's job.json is what the merge of the job's directory read; its report.json, named one by one,
    // says the same.
    std::vector<std::string> files = {"--merge", "--format", "json"};
    for (const auto& entry : fs::directory_iterator(job)) {
        CHECK(fs::exists(entry.path() / "job.json"));
        files.push_back(entry.path().string() + "/report.json");
    }
    CHECK(merged["reports"].size() == 3);
    CHECK(merged["reports"][0].get<std::string>().ends_with("/job.json"));
    const json from_reports = json::parse(report_output(dir, files));
    CHECK(from_reports["job"] == direct["job"]);
    CHECK(from_reports["run"]["shared_devices"] == direct["run"]["shared_devices"]);
    const std::string text = squeezed(report_output(dir, {"--merge", "--no-color", job}));
    CHECK(text.starts_with("Merged from 3 reports of the job's runs:"));
    CHECK(text.find("Job 81234, 3 ranks of 3: rank host") != std::string::npos);
    CHECK(text.find("Rank 1 made a context on device 0, rank 0's (first at ") != std::string::npos);
    CHECK(text.find("Rank 2 ran out of memory at ") != std::string::npos);
    CHECK(text.find("Device 0 was used by 3 processes") != std::string::npos);
}

TEST_CASE("a run in which no process is a rank writes no job.json") {
    TempDir dir;
    const std::string run = dir.path() + "/run";
    TracedRun traced = launch(dir, {"run", "-o", run, "--", program_path("scenario_stable"), "5"});
    REQUIRE(traced.exited_with(0));
    CHECK(fs::exists(run + "/report.json"));
    CHECK_FALSE(fs::exists(run + "/job.json"));
}

TEST_CASE("a merge refuses what is not a machine's report, in one line") {
    TempDir dir;
    const std::string job = dir.path() + "/job";
    run_as_srun_task(dir, job, 0, 2, {program_path("scenario_stable"), "5"});
    const std::string report =
        job + "/" + fs::directory_iterator(job)->path().filename().string() + "/report.json";
    RunOptions plain;
    plain.preload = false;
    const auto refused = [&](const std::vector<std::string>& arguments, const std::string& said) {
        TracedRun run = run_traced(dir, GPULEAK_REPORT, arguments, plain);
        INFO(run.err);
        CHECK(run.exited_with(2));
        CHECK(run.out.empty());
        CHECK(std::count(run.err.begin(), run.err.end(), '\n') == 1);
        CHECK(run.err.find(said) != std::string::npos);
    };
    refused({"--merge", dir.path() + "/nothing-here"}, "nothing-here");
    const std::string empty = dir.path() + "/empty";
    fs::create_directory(empty);
    refused({"--merge", empty}, "neither job.json nor report.json in it");
    const std::string text = dir.path() + "/notes.json";
    std::ofstream(text) << "not json";
    refused({"--merge", text}, "not JSON");
    const std::string other = dir.path() + "/other.json";
    std::ofstream(other) << R"({"schema": "something-else/1", "processes": []})";
    refused({"--merge", other}, "not a gpuleak report");
    refused({"--merge", "--format", "pprof", "-o", dir.path() + "/out.pb.gz", report},
            "--format pprof cannot show merged reports");
    // The same report twice: its rank once, with a warning.
    TracedRun twice = run_traced(dir, GPULEAK_REPORT, {"--merge", "--format", "json", report, report}, plain);
    CHECK(twice.exited_with(0));
    CHECK(twice.err.find("rank 0 is in an earlier report too") != std::string::npos);
    CHECK(json::parse(twice.out)["job"]["ranks"].size() == 1);
}

TEST_CASE("run -o DIR refuses a directory others may write to, before the command runs") {
    TempDir dir;
    const std::string shared = dir.path() + "/shared";
    REQUIRE(::mkdir(shared.c_str(), 0777) == 0);
    REQUIRE(::chmod(shared.c_str(), 0777) == 0);
    TracedRun run = launch(dir, {"run", "-o", shared, "--", program_path("launched_command"), "exit", "0"});
    CHECK(run.exited_with(125));
    CHECK(run.out.empty());
    CHECK(run.err ==
          "gpuleak: -o " + shared +
              ": the directory is writable by others than its owner: others could read, replace or "
              "remove the run's traces and report; name a directory of your own with -o\n");
    CHECK(fs::is_empty(shared));
}

namespace {

// gpuleak kernel run of a command, with the kernels' state under `dir`/state.
TracedRun run_kernel_with_state_in(const TempDir& dir) {
    RunOptions options;
    options.environment = {"XDG_STATE_HOME=" + dir.path() + "/state"};
    return launch(dir, {"kernel", "run", "--", program_path("launched_command"), "exit", "0"}, options);
}

} // namespace

TEST_CASE("a kernel's state directory others may write to, or a link in its place, is refused") {
    for (const bool link : {false, true}) {
        TempDir dir;
        const std::string kernels = dir.path() + "/state/gpuleak/kernels";
        fs::create_directories(dir.path() + "/state/gpuleak");
        if (link) {
            // Anywhere else: the launcher would write the kernel's traces and its death summary there.
            fs::create_directory(dir.path() + "/elsewhere");
            fs::create_directory_symlink(dir.path() + "/elsewhere", kernels);
        } else {
            // Another user's, open to all, made for the kernel to write into.
            REQUIRE(::mkdir(kernels.c_str(), 0777) == 0);
            REQUIRE(::chmod(kernels.c_str(), 0777) == 0);
            if (::chown(kernels.c_str(), 65534, 65534) != 0) {
                WARN("chown needs root here: another user's kernels directory not tested");
                continue;
            }
        }
        TracedRun run = run_kernel_with_state_in(dir);
        INFO(run.err);
        CHECK(run.exited_with(125));
        CHECK(run.out.empty());
        CHECK(one_line(run.err));
        CHECK(run.err.find("gpuleak: " + kernels + ": the kernel's state directory is " +
                           (link ? "not a directory but a link or a file"
                                 : "writable by others than its owner")) == 0);
        CHECK(fs::is_empty(link ? dir.path() + "/elsewhere" : kernels));
    }
}

TEST_CASE("a kernel's state directory of the user's own that others could write to becomes 0700") {
    TempDir dir;
    // As an earlier launcher left it under a umask of 002.
    const std::string kernels = dir.path() + "/state/gpuleak/kernels";
    fs::create_directories(kernels);
    REQUIRE(::chmod(kernels.c_str(), 0777) == 0);
    TracedRun run = run_kernel_with_state_in(dir);
    INFO(run.err);
    CHECK(run.exited_with(0));
    CHECK((fs::status(kernels).permissions() & fs::perms::all) == fs::perms::owner_all);
}

TEST_CASE("without -o the run gets a new directory named after the command and the time") {
    TempDir dir;
    TracedRun run = launch(dir, {"run", program_path("launched_command"), "exit", "0"});
    INFO(run.err);
    REQUIRE(run.exited_with(0));
    const std::string directory = only_run_directory(dir.path());
    CHECK(std::regex_match(fs::path(directory).filename().string(),
                           std::regex("gpuleak-launched_command-[0-9]{8}-[0-9]{6}")));
    CHECK(traces_in(directory).size() == 1);
    CHECK(fs::exists(directory + "/report.txt"));
    CHECK(fs::exists(directory + "/report.json"));
    CHECK(run.err.find(directory) != std::string::npos);
}

TEST_CASE("the summary names the function that leaks") {
    TempDir dir;
    TracedRun run = launch(dir, {"run", program_path("scenario_leak"), "20"});
    INFO(run.err);
    REQUIRE(run.exited_with(0));
    CHECK(run.err.find("diagnosis: leak") != std::string::npos);
    CHECK(run.err.find("top leak origin: keep_history") != std::string::npos);
    CHECK(run.out.empty());
    const std::string text = read_text(only_run_directory(dir.path()) + "/report.txt");
    CHECK(text.find("keep_history") != std::string::npos);
}

TEST_CASE("a command named with terminal escapes and a newline gets one escaped line each") {
    TempDir dir;
    const std::string hostile = "launched\x1b]0;pwned\x07\x1b[2J\nFAKE LINE: diagnosis: stable";
    const std::string command = dir.path() + "/" + hostile;
    fs::create_symlink(program_path("launched_command"), command);
    TracedRun run = launch(dir, {"run", "-o", dir.path() + "/run", "--", command, "exit", "0"});
    INFO(run.err);
    REQUIRE(run.exited_with(0));
    CHECK(run.err.find('\x1b') == std::string::npos);
    CHECK(run.err.find('\x07') == std::string::npos);
    CHECK(run.err.find("\nFAKE LINE") == std::string::npos);
    CHECK(run.err.find("launched\\x1b]0;pwned\\x07\\x1b[2J\\nFAKE LINE: diagnosis: stable exited with "
                       "status 0") != std::string::npos);
    const std::string text = read_text(dir.path() + "/run/report.txt");
    CHECK(text.find('\x1b') == std::string::npos);
    CHECK(text.find("\nFAKE LINE") == std::string::npos);
}

TEST_CASE("the options become the recorder's settings, validated") {
    TempDir dir;
    TracedRun run = launch(dir, {"run", "--max-mb", "8", "--stack-depth", "5", "--sample-ms", "50",
                                 "--no-python", "--quiet", program_path("launched_command"), "show"});
    INFO(run.err);
    REQUIRE(run.exited_with(0));
    CHECK(shown(run.out, "GPULEAK_MAX_MB") == "8");
    CHECK(shown(run.out, "GPULEAK_STACK_DEPTH") == "5");
    CHECK(shown(run.out, "GPULEAK_SAMPLE_MS") == "50");
    CHECK(shown(run.out, "GPULEAK_PYTHON") == "0");
    CHECK(shown(run.out, "GPULEAK_QUIET") == "1");
    CHECK(shown(run.out, "GPULEAK_OUTPUT").find("/gpuleak.%r%p.trace") != std::string::npos);

    // In effect: an 8 MiB trace, and no line from the recorder.
    TracedRun small = launch(dir, {"run", "-o", dir.path() + "/small", "--max-mb", "8", "--quiet",
                                   program_path("launched_command"), "exit", "0"});
    REQUIRE(small.exited_with(0));
    const std::vector<std::string> traces = traces_in(dir.path() + "/small");
    REQUIRE(traces.size() == 1);
    CHECK(fs::file_size(dir.path() + "/small/" + traces[0]) <= (uint64_t{8} << 20));
    CHECK(small.err.find("recording GPU memory") == std::string::npos);

    for (const std::vector<std::string>& bad : std::vector<std::vector<std::string>>{
             {"--max-mb", "3"}, {"--stack-depth", "257"}, {"--sample-ms", "0"}, {"--max-mb", "lots"}}) {
        std::vector<std::string> arguments{"run"};
        arguments.insert(arguments.end(), bad.begin(), bad.end());
        arguments.push_back(program_path("launched_command"));
        TracedRun refused = launch(dir, arguments);
        INFO(bad[0] << " " << bad[1] << ": " << refused.err);
        CHECK(refused.exited_with(125));
        CHECK(one_line(refused.err));
        CHECK(refused.err.find(bad[0]) != std::string::npos);
    }
}

TEST_CASE("a process with a rank in its environment writes a trace named with it") {
    TempDir dir;
    RunOptions options;
    options.environment = {"RANK=3"};
    TracedRun run = launch(dir, {"run", program_path("launched_command"), "exit", "0"}, options);
    INFO(run.err);
    REQUIRE(run.exited_with(0));
    const std::vector<std::string> traces = traces_in(only_run_directory(dir.path()));
    REQUIRE(traces.size() == 1);
    CHECK(std::regex_match(traces[0], std::regex("gpuleak\\.rank3\\.[0-9]+\\.trace")));
}

TEST_CASE("a command that allocates no GPU memory leaves no directory") {
    TempDir dir;
    TracedRun run = launch(dir, {"run", program_path("launched_command"), "show"});
    INFO(run.err);
    REQUIRE(run.exited_with(0));
    CHECK(run.err.find("nothing was recorded") != std::string::npos);
    CHECK(run_directories(dir.path()).empty());
}

TEST_CASE("installed as <prefix>/bin/gpuleak, the launcher preloads <prefix>/lib/libgpuleak.so") {
    TempDir dir;
    const fs::path prefix = fs::path(dir.path()) / "prefix";
    fs::create_directories(prefix / "bin");
    const fs::path launcher = prefix / "bin" / "gpuleak";
    fs::copy_file(GPULEAK_LAUNCHER, launcher);
    RunOptions options;
    options.preload = false;

    TracedRun without_library =
        run_traced(dir, launcher.string(), {"run", program_path("launched_command"), "show"}, options);
    CHECK(without_library.exited_with(125));
    CHECK(one_line(without_library.err));
    CHECK(without_library.err.find("cannot find libgpuleak.so") != std::string::npos);

    fs::create_directories(prefix / "lib");
    fs::copy_file(library_path(), prefix / "lib" / "libgpuleak.so");
    TracedRun installed =
        run_traced(dir, launcher.string(), {"run", program_path("launched_command"), "show"}, options);
    INFO(installed.err);
    REQUIRE(installed.exited_with(0));
    CHECK(shown(installed.out, "LD_PRELOAD") == (prefix / "lib" / "libgpuleak.so").string());

    // GPULEAK_LIBRARY wins over both; one that is not there is an error.
    options.environment = {"GPULEAK_LIBRARY=" + library_path()};
    TracedRun overridden =
        run_traced(dir, launcher.string(), {"run", program_path("launched_command"), "show"}, options);
    REQUIRE(overridden.exited_with(0));
    CHECK(shown(overridden.out, "LD_PRELOAD") == library_path());
    options.environment = {"GPULEAK_LIBRARY=" + dir.path() + "/nothing.so"};
    TracedRun missing =
        run_traced(dir, launcher.string(), {"run", program_path("launched_command"), "show"}, options);
    CHECK(missing.exited_with(125));
    CHECK(missing.err == "gpuleak: GPULEAK_LIBRARY=" + dir.path() + "/nothing.so: no such file\n");
}
