// Turns trace files into process reports: read, model, symbolize, diagnose.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "report/report.h"
#include "report/report_set.h"
#include "symbols/symbolizer.h"

namespace gpuleak::analyzer {

struct SymbolizeOptions {
    // Where separate debug info is looked for (elfutils' syntax; empty: its default).
    std::string debuginfo_path;
    // Where frames are kept between reports (symbol_cache.h); empty: nowhere.
    std::string cache_directory;
    // A second thread reads the debug info of each trace's modules while its model is built, sooner
    // than the report needs it and perhaps some that it never needs; the reports are the same either way.
    bool read_ahead = true;
    // The modules opened for earlier reports of these processes (gpuleak watch's frames, a report a
    // second), which they go on using; null: opened for this report.
    std::shared_ptr<ModuleRegistry> modules;
};

// What a report's model learns from its stacks, once both are set, and then its diagnosis: which stack
// started each thread, and which sites are a framework's own pool (pool_owner).
void diagnose_report(ProcessReport& report);

// Reports of more processes than this are kept as summaries, each made whole again from its trace when a
// renderer comes to it (ReportSet): what a report holds stays that of a few whole reports, however many
// processes a job had.
inline constexpr size_t kReportsKeptWhole = 64;

// Throws TraceError for a file that cannot be read as a trace at all, also when a renderer asks a
// summary's whole report and its trace is gone. `detail` and `moments`: what each model keeps of its
// trace (build_model). `kept_whole`: the most processes whose reports are kept whole.
ReportSet build_reports(const std::vector<std::string>& trace_paths, const SymbolizeOptions& options = {},
                        ModelDetail detail = ModelDetail::Summary,
                        const std::vector<std::string>& moments = {}, size_t kept_whole = kReportsKeptWhole);

} // namespace gpuleak::analyzer
