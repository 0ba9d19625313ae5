// Turns trace files into process reports: read, model, symbolize, diagnose.
#pragma once

#include <string>
#include <vector>

#include "report.h"

namespace gpuleak::analyzer {

// Throws TraceError for a file that cannot be read as a trace at all.
std::vector<ProcessReport> build_reports(const std::vector<std::string>& trace_paths);

} // namespace gpuleak::analyzer
