#include "python_interleave.h"

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
                                                  const std::vector<ReportFrame>& python) {
    std::vector<ReportFrame> frames;
    frames.reserve(native.size() + python.size());
    size_t loops_left = static_cast<size_t>(std::count_if(native.begin(), native.end(), is_evaluation_loop));
    auto next = python.begin();
    for (const ReportFrame& frame : native) {
        frames.push_back(frame);
        if (!is_evaluation_loop(frame) || next == python.end())
            continue;
        --loops_left;
        const auto until = loops_left == 0 ? python.end() : next + 1;
        frames.insert(frames.end(), next, until);
        next = until;
    }
    frames.insert(frames.end(), next, python.end());
    return frames;
}

} // namespace gpuleak::analyzer
