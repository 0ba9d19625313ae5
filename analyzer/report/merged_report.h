// The reports that gpuleak run wrote on each machine of a job (report.json), read as one report: nothing
// reads the traces, which each machine reported on itself. What each machine's report says of its ranks,
// of the devices that several of its processes shared, and of each process stays as it said it; what the
// ranks say together (which stand apart, which leaks they share) is judged again over all of them. The
// reader of what render_json writes of a job and its devices: its mirror image.
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "report/job_facts.h"
#include "report/shared_devices.h"

namespace gpuleak::analyzer {

struct MergedReport {
    std::vector<std::string> sources; // the report.json files, in the order read
    JobFacts job;                     // without ranks where no report has one
    std::vector<SharedDevice> shared_devices;
    nlohmann::json processes = nlohmann::json::array(); // every report's, as it wrote them
    std::vector<std::string> process_names;             // each process's role in words, else its command
    std::map<int, std::string> ended;                   // by rank: how it ended, where it failed
    std::vector<std::string> warnings;                  // one line each

    // How a failed rank ended, as its machine's report said it (EndedText).
    [[nodiscard]] std::string ended_of(const RankRow& row) const {
        const auto found = ended.find(row.rank);
        return found != ended.end() ? found->second : std::string();
    }
};

// `inputs`: job.json or report.json files, or directories with them in their subdirectories (a job's -o
// DIR, where each machine's run has a directory of its own; a run's job.json is read where it has one).
// Throws TraceError for an input that is not such a report.
MergedReport merge_reports(const std::vector<std::string>& inputs);

// Whether a merge reads a process's value `key` at `level` below the process object (1: the process's own
// keys; 2: those of its `top` one, "summary", "diagnosis", "ended"; 4: those of a device of its summary):
// what it parses of a report.json, and all that a run's job.json keeps of each process.
bool merge_reads(size_t level, std::string_view top, std::string_view key);

} // namespace gpuleak::analyzer
