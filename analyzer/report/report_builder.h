// Turns trace files into process reports: read, model, symbolize, diagnose.
#pragma once

#include <string>
#include <vector>

#include "report/report.h"

namespace gpuleak::analyzer {

struct SymbolizeOptions {
    // Where separate debug info is looked for (elfutils' syntax; empty: its default).
    std::string debuginfo_path;
    // Where frames are kept between reports (symbol_cache.h); empty: nowhere.
    std::string cache_directory;
    // A second thread reads the debug info of each trace's modules while its model is built, sooner
    // than the report needs it and perhaps some that it never needs; the reports are the same either way.
    bool read_ahead = true;
};

// What a report's model learns from its stacks, once both are set, and then its diagnosis: which stack
// started each thread, and which sites are a framework's own pool (pool_owner).
void diagnose_report(ProcessReport& report);

// Throws TraceError for a file that cannot be read as a trace at all. `detail` and `moments`: what each
// model keeps of its trace (build_model).
std::vector<ProcessReport> build_reports(const std::vector<std::string>& trace_paths,
                                         const SymbolizeOptions& options = {},
                                         ModelDetail detail = ModelDetail::Summary,
                                         const std::vector<std::string>& moments = {});

} // namespace gpuleak::analyzer
