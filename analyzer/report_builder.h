// Turns trace files into process reports: read, model, symbolize, diagnose.
#pragma once

#include <string>
#include <vector>

#include "report.h"

namespace gpuleak::analyzer {

// Throws TraceError for a file that cannot be read as a trace at all. `debuginfo_path` says where
// separate debug info is looked for (elfutils' syntax; empty: its default). `read_ahead`: a second
// thread reads the debug info of each trace's modules while its model is built, sooner than the
// report needs it and perhaps some that it never needs; the reports are the same either way.
std::vector<ProcessReport> build_reports(const std::vector<std::string>& trace_paths,
                                         const std::string& debuginfo_path = {}, bool read_ahead = true);

} // namespace gpuleak::analyzer
