// Turns trace files into process reports: read, model, symbolize, diagnose.
#pragma once

#include <string>
#include <vector>

#include "report.h"

namespace gpuleak::analyzer {

// Throws TraceError for a file that cannot be read as a trace at all. `debuginfo_path` says where
// separate debug info is looked for (elfutils' syntax; empty: its default).
std::vector<ProcessReport> build_reports(const std::vector<std::string>& trace_paths,
                                         const std::string& debuginfo_path = {});

} // namespace gpuleak::analyzer
