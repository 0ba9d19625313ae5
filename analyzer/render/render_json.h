// The report as JSON (schema "gpuleak-report/1", documented in docs/reference/json.md): what other tools
// and later renderers build on.
#pragma once

#include <nlohmann/json.hpp>
#include <vector>

#include "report/merged_report.h"
#include "report/report.h"
#include "report/report_set.h"
#include "report/site_changes.h"

namespace gpuleak::analyzer {

nlohmann::json render_json(ReportSet& reports, const ReportOptions& options);

// render_json's parts: the report with "processes" an empty array, and one process's JSON. A renderer of
// many processes (a job's thousand ranks) makes one process's at a time and keeps what it needs of it:
// the whole document takes several times the memory of its text.
nlohmann::json run_json(ReportSet& reports);
nlohmann::json process_json(ProcessReport& report, const ReportOptions& options);

// A run's job as a merge reads it (schema "gpuleak-job/1", gpuleak run's job.json): its ranks, the devices
// its processes shared, each process cut to what tells the job with its devices' timelines thinned to a
// few KB; null where no process is a rank.
nlohmann::json render_job_json(ReportSet& reports, const ReportOptions& options);

// The reports of a job's machines merged (schema "gpuleak-job/1"): the job judged over all the ranks, the
// devices that processes shared, and every process cut to what tells the job.
nlohmann::json render_merged_json(const MergedReport& merged);

// What grew and what shrank between two states (--diff, --between), schema "gpuleak-changes/1".
nlohmann::json render_changes_json(Comparison& comparison, const ReportOptions& options);

} // namespace gpuleak::analyzer
