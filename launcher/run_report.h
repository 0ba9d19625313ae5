// The full report of a run, built in the launcher from every trace in the run's directory and written
// beside them: report.txt (what gpuleak-report prints) and report.json (its --format json).
#pragma once

#include <string>
#include <vector>

#include "report.h"
#include "run_directory.h"

namespace gpuleak::launcher {

struct RunReport {
    std::vector<analyzer::ProcessReport> processes;
    std::string text_path;
    std::string json_path;
};

// Throws TraceError when the directory holds no readable trace, LauncherError when a report file cannot
// be written.
RunReport write_run_report(const RunDirectory& directory);

} // namespace gpuleak::launcher
