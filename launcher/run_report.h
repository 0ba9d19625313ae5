// The full report of a run, built in the launcher from every trace in the run's directory and written
// beside them in each format that names a file for a run (renderers.h): report.txt (what gpuleak-report
// prints), report.json and report.html (its --format json and html).
#pragma once

#include <string>
#include <vector>

#include "launcher/run_directory.h"
#include "report/report.h"
#include "report/report_set.h"

namespace gpuleak::launcher {

struct RunReport {
    analyzer::ReportSet processes;
    // The files written, in the order of the renderers' table: the text report's first.
    std::vector<std::string> files;
};

// Throws TraceError when the directory holds no readable trace, LauncherError when a report file cannot
// be written.
RunReport write_run_report(const RunDirectory& directory);

} // namespace gpuleak::launcher
