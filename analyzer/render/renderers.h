// The report's output formats, in one table: gpuleak-report's --format, the files gpuleak run writes
// and the formats the notebook's magic offers all come from it. A renderer reads the models of the
// process reports only, never their traces.
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "model/process_model.h"
#include "render/report_sink.h"
#include "report/merged_report.h"
#include "report/report.h"
#include "report/report_set.h"
#include "report/site_changes.h"

namespace gpuleak::analyzer {

struct Renderer {
    std::string_view name;        // --format's value
    std::string_view description; // what --help says of it
    std::string_view media_type;  // what it is, for what shows it (a notebook shows text/html inline)
    // The file gpuleak run writes it to, beside the traces; empty: a run does not write it.
    std::string_view run_file;
    bool binary = false;      // bytes for a file, never for a terminal
    bool one_process = false; // of the first process only: the others are left out
    ModelDetail detail = ModelDetail::Summary;
    // Writes the report to `write`, nothing where the format has nothing to say of these processes (a job
    // of a run that is no job). What could not be rendered is said in `warnings`, one line each:
    // "TRACE: warning: ...".
    void (*render)(ReportSet& reports, const ReportOptions& options, const ReportSink& write,
                   std::vector<std::string>& warnings) = nullptr;
    // What changed between two states (--diff, --between); null where the format cannot say.
    std::string (*render_changes)(Comparison& comparison, const ReportOptions& options) = nullptr;
    // The reports of a job's machines merged (--merge); null where the format cannot show them.
    std::string (*render_merged)(const MergedReport& merged, const ReportOptions& options) = nullptr;
};

std::span<const Renderer> renderers();

// Null when no renderer has that name.
const Renderer* find_renderer(std::string_view name);

// The table as JSON (schema gpuleak-formats/1), for gpuleak-report --list-formats: what the notebook
// reads to pick the formats a front end shows.
std::string format_table_json();

} // namespace gpuleak::analyzer
