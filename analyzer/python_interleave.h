// One stack of a Python program, native and Python frames together: each Python frame goes after the
// native frame of the interpreter's evaluation loop that ran it (_PyEval_EvalFrameDefault).
//
// The trace does not say which evaluation loop ran which Python frame. On 3.10 each Python frame has
// its own loop, so the n-th loop from the innermost ran the n-th Python frame. From 3.11 one loop runs
// a Python function and the Python functions it calls, and a new loop starts only where C code calls
// back into Python; so frames are still matched to loops one to one from the innermost, and the
// Python frames left when the loops run out all go at the outermost loop. That is exact on 3.10 and
// for the common 3.11+ stack of one loop; elsewhere a Python frame may be shown a few native frames
// away from its loop, never out of order. Without any loop among the native frames (they could not
// be symbolized, or the native stack was cut before the interpreter) the Python frames follow them all.
#pragma once

#include <vector>

#include "report.h"

namespace gpuleak::analyzer {

// A native frame of CPython's evaluation loop.
bool is_evaluation_loop(const ReportFrame& frame);

// Both innermost first; so is the result.
std::vector<ReportFrame> interleave_python_frames(const std::vector<ReportFrame>& native,
                                                  const std::vector<ReportFrame>& python);

} // namespace gpuleak::analyzer
