#include "report/python_interleave.h"

#include <algorithm>
#include <string_view>

namespace gpuleak::analyzer {

bool is_evaluation_loop(const ReportFrame& frame) {
    // Named from the ELF symbol table, the part GCC splits off as cold code is a symbol of its own.
    constexpr std::string_view kLoop = "_PyEval_EvalFrameDefault";
    const std::string_view function = frame.function;
    return !frame.python && function.starts_with(kLoop) &&
           (function.size() == kLoop.size() || function[kLoop.size()] == '.');
}

std::vector<ReportFrame> interleave_python_frames(const std::vector<ReportFrame>& native,
                                                  const std::vector<ReportFrame>& python,
                                                  const std::vector<bool>& loop_entries) {
    std::vector<ReportFrame> frames;
    frames.reserve(native.size() + python.size());
    auto next = python.begin();
    auto next_entry = loop_entries.begin();
    for (const ReportFrame& frame : native) {
        frames.push_back(frame);
        if (!is_evaluation_loop(frame) || next == python.end())
            continue;
        // Up to and including the run's loop entry; a run cut by the depth has none and takes the rest.
        const auto run_size =
            std::min(std::find(next_entry, loop_entries.end(), true) - next_entry + 1, python.end() - next);
        frames.insert(frames.end(), next, next + run_size);
        next += run_size;
        next_entry += run_size;
    }
    frames.insert(frames.end(), next, python.end());
    return frames;
}

} // namespace gpuleak::analyzer
