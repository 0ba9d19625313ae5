// What the launcher says when a Jupyter kernel it runs dies (killed, crashed): the post-mortem summary
// written beside the kernel's traces and report, which the next kernel started for the same notebook
// shows in the output of its first cell.
#pragma once

#include <string>
#include <vector>

#include "launcher/run_summary.h"
#include "model/process_model.h"

namespace gpuleak::launcher {

// Where the kernel was, from the cell markers the gpuleak IPython extension records ("cell [N]" before a
// cell runs, "end of cell [N]" after it): "while running cell [5]", "after cell [5], between cells", or
// "before any cell ran".
std::string cell_position(const std::vector<analyzer::Marker>& markers);

// The summary's lines: how the kernel died, where, then what the report says (`report` may be null when
// none could be made: `no_report` says why) and where it is.
std::vector<std::string> death_summary(const CommandEnd& end, RunReport* report,
                                       const std::string& no_report);

// Whether the kernel's end is a death worth a post-mortem: a signal, or an exit with a failure status.
// ipykernel exits with 0 when Jupyter shuts it down or restarts it by request.
[[nodiscard]] bool kernel_died(int wait_status);

} // namespace gpuleak::launcher
