// One stack of a Python program, native and Python frames together: each Python frame goes after the
// native frame of the interpreter's evaluation loop that ran it (_PyEval_EvalFrameDefault).
//
// A run of the evaluation loop (one native frame) runs a Python frame and, from 3.11, the Python
// functions that frame calls, theirs, and so on; a new run starts only where C code calls back into
// Python (on 3.10 every Python frame has a run of its own). The recorder marks the first frame of each
// run, its loop entry (PythonFrame::loop_entry), so the Python frames, innermost first, are cut into
// runs that each end, on the outermost side, at a loop entry, and the n-th run from the innermost goes
// after the n-th loop frame from the innermost: where it ran.
//
// Where the counts disagree, the frames still keep their order. With more runs than loop frames (the
// native stack was cut at its depth before the interpreter's outer loops, or no loop frame could be
// named: an interpreter without symbols) the runs left over go after the last native frame, as the
// loops that ran them are further out than every native frame kept. With fewer runs (the Python frames
// were cut at their depth, and the outermost run kept may lack its loop entry) the outer loops are
// left without Python frames.
#pragma once

#include <vector>

#include "report/report.h"

namespace gpuleak::analyzer {

// A native frame of CPython's evaluation loop.
bool is_evaluation_loop(const ReportFrame& frame);

// `native` and `python` innermost first, and so is the result; `loop_entries` tells for each of `python`
// whether it is a loop entry, so it is as long.
std::vector<ReportFrame> interleave_python_frames(const std::vector<ReportFrame>& native,
                                                  const std::vector<ReportFrame>& python,
                                                  const std::vector<bool>& loop_entries);

} // namespace gpuleak::analyzer
