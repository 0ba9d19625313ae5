// The report as one self-contained HTML page, for a browser and a notebook: per process the timeline of
// reserved, allocated and host memory with its markers and failures, the diagnosis, and a flame graph of
// what holds the memory at the end and at each failure; a stretch selected on the timeline shows what
// was made in it and is still alive, and what was freed. Everything it needs is inside: no network.
#pragma once

#include <string>
#include <vector>

#include "report/merged_report.h"
#include "report/report.h"
#include "report/report_set.h"
#include "report/site_changes.h"

namespace gpuleak::analyzer {

// The models must hold their live allocations and events (ModelDetail::Allocations).
std::string render_html(ReportSet& reports, const ReportOptions& options);

// The reports of a job's machines merged: the ranks' chart and what they say together, the devices that
// processes shared, and every process listed (each machine's own page draws them).
std::string render_merged_html(const MergedReport& merged);

// What changed between two states (--diff, --between): each site's bytes then and now as a pair of bars,
// with its stack, the largest change first.
std::string render_changes_html(Comparison& comparison, const ReportOptions& options);

} // namespace gpuleak::analyzer
