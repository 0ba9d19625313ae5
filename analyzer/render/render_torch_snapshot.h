// A process's GPU memory as PyTorch's memory snapshot (torch.cuda.memory._snapshot(), written by
// _dump_snapshot), for `python -m torch.cuda._memory_viz` and pytorch.org/memory_viz: the segments live
// at the end with their blocks, and the event ring as each device's trace.
#pragma once

#include <string>
#include <vector>

#include "report/report.h"

namespace gpuleak::analyzer {

// The model must hold its live allocations and events (ModelDetail::Allocations). Returns the pickle;
// what could not be placed in it is said in `warnings`, one line each.
std::string render_torch_snapshot(ProcessReport& report, const ReportOptions& options,
                                  std::vector<std::string>& warnings);

} // namespace gpuleak::analyzer
