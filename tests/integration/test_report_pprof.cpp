// gpuleak-report --format pprof, read back by pprof itself (`go tool pprof -raw`): what each stack holds at
// the end and made over the run, by process, device and kind, agrees with the JSON report.
#include <catch2/catch.hpp>

#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "scenario_report.h"
#include "traced_run.h"

using nlohmann::json;

namespace {

constexpr int64_t kMiB = int64_t{1} << 20;

struct Location {
    std::string function;
    std::string file_line; // "/path/file.cpp:23"
};

struct Sample {
    int64_t alloc_objects = 0;
    int64_t alloc_space = 0;
    int64_t inuse_objects = 0;
    int64_t inuse_space = 0;
    std::vector<int> locations; // innermost first
    std::map<std::string, std::string> labels;
};

struct Profile {
    std::string sample_types;
    std::vector<std::string> comments;
    std::vector<Sample> samples;
    std::map<int, Location> locations;

    [[nodiscard]] int64_t total_inuse() const {
        int64_t total = 0;
        for (const Sample& sample : samples)
            total += sample.inuse_space;
        return total;
    }
    // The samples whose innermost frame is `function` at a file ending in `file_line`.
    [[nodiscard]] std::vector<const Sample*> made_at(const std::string& function,
                                                     const std::string& file_line) const {
        std::vector<const Sample*> found;
        for (const Sample& sample : samples) {
            if (sample.locations.empty())
                continue;
            const Location& innermost = locations.at(sample.locations.front());
            if (innermost.function == function && innermost.file_line.ends_with(file_line))
                found.push_back(&sample);
        }
        return found;
    }
};

RunOptions not_traced() {
    RunOptions options;
    options.preload = false;
    return options;
}

// `go tool pprof -raw`: the comments, then the sample types and each sample's values, location ids and
// labels, then each location as "id: address function file:line s=0".
Profile read_profile(const TempDir& dir, const std::string& path) {
    TracedRun pprof = run_traced(dir, GO_EXECUTABLE, {"tool", "pprof", "-raw", path}, not_traced());
    INFO(pprof.err);
    REQUIRE(pprof.exited_with(0));
    Profile profile;
    std::istringstream lines(pprof.out);
    std::string line;
    enum { Header, Samples, Locations, Rest } part = Header;
    while (std::getline(lines, line)) {
        if (line.starts_with("Comment: ")) {
            profile.comments.push_back(line.substr(9));
        } else if (line == "Samples:") {
            part = Samples;
            std::getline(lines, profile.sample_types);
        } else if (line == "Locations") {
            part = Locations;
        } else if (line == "Mappings") {
            part = Rest;
        } else if (part == Samples && line.find(':') != std::string::npos &&
                   line.find('[') == std::string::npos) {
            Sample sample;
            std::istringstream fields(line.substr(0, line.find(':')));
            fields >> sample.alloc_objects >> sample.alloc_space >> sample.inuse_objects >>
                sample.inuse_space;
            std::istringstream ids(line.substr(line.find(':') + 1));
            for (int id = 0; ids >> id;)
                sample.locations.push_back(id);
            profile.samples.push_back(sample);
        } else if (part == Samples && !profile.samples.empty()) {
            // "key:[value] key:[value]"
            std::istringstream labels(line);
            for (std::string label; labels >> label;)
                if (const size_t colon = label.find(":["); colon != std::string::npos)
                    profile.samples.back().labels[label.substr(0, colon)] =
                        label.substr(colon + 2, label.size() - colon - 3);
        } else if (part == Locations) {
            std::istringstream fields(line);
            int id = 0;
            char colon = 0;
            std::string address;
            Location location;
            if (fields >> id >> colon >> address >> location.function >> location.file_line)
                profile.locations[id] = location;
        }
    }
    return profile;
}

Profile pprof_of(const TempDir& dir, const std::vector<std::string>& traces) {
    const std::string path = dir.path() + "/profile.pb.gz";
    std::vector<std::string> arguments{"--format", "pprof", "-o", path};
    arguments.insert(arguments.end(), traces.begin(), traces.end());
    TracedRun report = run_traced(dir, GPULEAK_REPORT, arguments, not_traced());
    INFO(report.err);
    REQUIRE(report.exited_with(0));
    return read_profile(dir, path);
}

// "scenario_leak.cpp:23": the tagged line as pprof spells a location's file and line.
std::string place_of(const std::string& source, const std::string& tag) {
    return source + ":" + std::to_string(line_of(source, tag));
}

} // namespace

TEST_CASE("pprof reads what each stack holds at the end and what it allocated, as the report counts it") {
    TempDir dir;
    TracedRun run = run_traced(dir, program_path("scenario_leak"), {"20"});
    REQUIRE(run.exited_with(0));
    const Profile profile = pprof_of(dir, run.traces());
    const json process = report_json(dir, run.traces())["processes"][0];

    CHECK(profile.sample_types.find("inuse_space/bytes[dflt]") != std::string::npos);
    CHECK(profile.total_inuse() == process["summary"]["final_allocated_bytes"].get<int64_t>());
    // The leak: 20 buffers of 1 MiB, each made once and kept.
    const auto leak = profile.made_at("keep_history", place_of("scenario_leak.cpp", "leak site"));
    REQUIRE(leak.size() == 1);
    CHECK(leak[0]->inuse_space == 20 * kMiB);
    CHECK(leak[0]->inuse_objects == 20);
    CHECK(leak[0]->alloc_objects == 20);
    CHECK(leak[0]->labels.at("pid") == std::to_string(process["pid"].get<int>()));
    CHECK(leak[0]->labels.at("device") == "cuda:0");
    CHECK(leak[0]->labels.at("kind") == "device");
    // A step's 8 MiB scratch buffer, freed each iteration: nothing held, all of it allocated.
    int64_t scratch_made = 0;
    for (const Sample* sample : profile.made_at("step", place_of("scenario_leak.cpp", "scratch site"))) {
        CHECK(sample->inuse_space == 0);
        scratch_made += sample->alloc_space;
    }
    CHECK(scratch_made == int64_t{20 * 8} * kMiB);
    // The outermost frames are the program's start: a flame graph's root is the whole of it.
    const Location& outermost = profile.locations.at(leak[0]->locations.back());
    CHECK(outermost.function == "_start");
    REQUIRE(!profile.comments.empty());
    CHECK(profile.comments[0].find("simulated CUDA device") != std::string::npos);
}

TEST_CASE("pprof shows a caching allocator's cache as reserved but not allocated, beside its blocks") {
    TempDir dir;
    TracedRun run = run_traced(dir, program_path("scenario_cache_growth"), {"20"});
    REQUIRE(run.exited_with(0));
    const Profile profile = pprof_of(dir, run.traces());
    const json summary = report_json(dir, run.traces())["processes"][0]["summary"];

    int64_t cached_bytes = 0;
    int64_t blocks = 0;
    for (const Sample& sample : profile.samples) {
        if (sample.labels.at("kind") == "cached")
            cached_bytes += sample.inuse_space;
        else if (sample.labels.at("kind") == "block")
            blocks += sample.inuse_space;
        // The segments the blocks lie in are not counted again.
        CHECK(sample.labels.at("kind") != "device");
    }
    CHECK(blocks == summary["final_allocated_bytes"].get<int64_t>());
    CHECK(cached_bytes ==
          summary["final_reserved_bytes"].get<int64_t>() - summary["final_allocated_bytes"].get<int64_t>());
    CHECK(profile.total_inuse() == summary["final_reserved_bytes"].get<int64_t>());
}

TEST_CASE("pprof counts the allocations a small trace keeps by site only, as the report does") {
    TempDir dir;
    RunOptions options;
    // Two blocks a step, far past the 28,541 live slots of the smallest trace.
    options.environment = {"GPULEAK_MAX_MB=4"};
    TracedRun run = run_traced(dir, program_path("scenario_many_live"), {"60000"}, options);
    REQUIRE(run.exited_with(0));
    const Profile profile = pprof_of(dir, run.traces());
    const json process = report_json(dir, run.traces())["processes"][0];
    REQUIRE(process["summary"]["exactness"]["spilled"].get<int64_t>() > 0);
    int64_t blocks = 0;
    int64_t block_objects = 0;
    for (const Sample& sample : profile.samples) {
        if (sample.labels.at("kind") != "block")
            continue;
        blocks += sample.inuse_space;
        block_objects += sample.inuse_objects;
        CHECK(sample.labels.at("device") == "cuda:0");
    }
    CHECK(blocks == process["summary"]["final_allocated_bytes"].get<int64_t>());
    CHECK(block_objects == 2 * 60000);
    CHECK(profile.total_inuse() == process["summary"]["final_reserved_bytes"].get<int64_t>());
}

TEST_CASE("pprof holds every process of a run, each sample labelled with its pid") {
    TempDir dir;
    TracedRun run = run_traced(dir, program_path("scenario_worker_leak"), {});
    REQUIRE(run.exited_with(0));
    const Profile profile = pprof_of(dir, run.traces());
    const json report = report_json(dir, run.traces());

    std::map<std::string, int64_t> held_by_pid;
    for (const Sample& sample : profile.samples)
        held_by_pid[sample.labels.at("pid")] += sample.inuse_space;
    REQUIRE(held_by_pid.size() == report["processes"].size());
    for (const json& process : report["processes"])
        CHECK(held_by_pid[std::to_string(process["pid"].get<int>())] ==
              process["summary"]["final_allocated_bytes"].get<int64_t>());
    const auto leak =
        profile.made_at("worker_keeps_batch", place_of("scenario_worker_leak.cpp", "worker leak site"));
    REQUIRE(leak.size() == 1);
    CHECK(leak[0]->inuse_space == 20 * kMiB);
    CHECK(profile.comments.size() == 2);
}

TEST_CASE("a binary format is refused on a terminal or stdout, with one line saying to name a file") {
    TempDir dir;
    TracedRun run = run_traced(dir, program_path("scenario_leak"), {"3"});
    REQUIRE(run.exited_with(0));
    std::vector<std::string> arguments{"--format", "pprof"};
    const std::vector<std::string> traces = run.traces();
    arguments.insert(arguments.end(), traces.begin(), traces.end());
    TracedRun report = run_traced(dir, GPULEAK_REPORT, arguments, not_traced());
    CHECK(report.exited_with(2));
    CHECK(report.out.empty());
    CHECK(report.err == "gpuleak-report: --format pprof writes binary data: name a file with -o FILE\n");
}
