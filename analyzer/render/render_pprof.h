// The memory live at the end as a pprof profile (github.com/google/pprof, proto/profile.proto, gzipped),
// for `go tool pprof` and speedscope: what each stack holds (inuse_space, inuse_objects) and what it
// allocated over the events the trace kept (alloc_space, alloc_objects), labelled by process, device
// and kind, with a caching allocator's cached bytes as one frame of their own.
#pragma once

#include <string>
#include <vector>

#include "report/report.h"
#include "report/report_set.h"

namespace gpuleak::analyzer {

// The models must hold their ring's events (ModelDetail::Allocations). Returns the gzipped profile;
// what could not be placed in it is said in `warnings`, one line each.
std::string render_pprof(ReportSet& reports, const ReportOptions& options,
                         std::vector<std::string>& warnings);

} // namespace gpuleak::analyzer
