#include "stack_view.h"

#include <algorithm>
#include <set>

#include <fmt/format.h>

#include "python_interleave.h"

namespace gpuleak::analyzer {

namespace {

bool is_python(const ReportFrame& frame) {
    return frame.python;
}

std::vector<StackLine> all_frames(const std::vector<ReportFrame>& frames, size_t depth) {
    std::vector<StackLine> lines;
    for (size_t i = 0; i < frames.size() && i < depth; ++i)
        lines.push_back({StackLine::Kind::Frame, &frames[i], 0});
    if (frames.size() > depth)
        lines.push_back({StackLine::Kind::MoreLeftOut, nullptr, frames.size() - depth});
    return lines;
}

// Native frames left out together: one line, unless they are all the interpreter's.
class NativeRun {
  public:
    void add(bool interpreter) {
        ++frames_;
        foreign_ = foreign_ || !interpreter;
    }
    void flush(std::vector<StackLine>& lines) {
        if (foreign_)
            lines.push_back({StackLine::Kind::NativeLeftOut, nullptr, frames_});
        *this = {};
    }

  private:
    size_t frames_ = 0;
    bool foreign_ = false;
};

} // namespace

std::vector<StackLine> stack_lines(const std::vector<ReportFrame>& frames, const ReportOptions& options) {
    const size_t depth = options.stack_depth;
    if (options.native || std::none_of(frames.begin(), frames.end(), is_python))
        return all_frames(frames, depth);

    std::set<std::string> interpreter_modules;
    for (const ReportFrame& frame : frames)
        if (is_evaluation_loop(frame))
            interpreter_modules.insert(frame.module);
    const auto is_interpreter = [&](const ReportFrame& frame) {
        return !frame.python && interpreter_modules.contains(frame.module);
    };

    std::vector<StackLine> lines;
    auto frame = frames.begin();
    for (; frame != frames.end() && !frame->python && !is_interpreter(*frame) && lines.size() < depth;
         ++frame)
        lines.push_back({StackLine::Kind::Frame, &*frame, 0});
    NativeRun run;
    size_t python_shown = 0;
    for (; frame != frames.end(); ++frame) {
        if (!frame->python) {
            run.add(is_interpreter(*frame));
            continue;
        }
        if (python_shown == depth) {
            lines.push_back({StackLine::Kind::MorePythonLeftOut, nullptr,
                             static_cast<size_t>(std::count_if(frame, frames.end(), is_python))});
            return lines;
        }
        run.flush(lines);
        lines.push_back({StackLine::Kind::Frame, &*frame, 0});
        ++python_shown;
    }
    run.flush(lines);
    return lines;
}

std::vector<const ReportFrame*> shown_frames(const std::vector<ReportFrame>& frames,
                                             const ReportOptions& options) {
    std::vector<const ReportFrame*> shown;
    for (const StackLine& line : stack_lines(frames, options))
        if (line.kind == StackLine::Kind::Frame)
            shown.push_back(line.frame);
    return shown;
}

std::string python_frame_name(const ReportFrame& frame) {
    if (!frame.source_name.empty()) {
        const std::string where =
            frame.line == 0 ? frame.source_name : fmt::format("{}, line {}", frame.source_name, frame.line);
        const std::string function = frame.function.empty() ? std::string("?") : frame.function;
        return frame.source_line.empty() ? fmt::format("{} in {}", where, function)
                                         : fmt::format("{} in {} (`{}`)", where, function, frame.source_line);
    }
    if (frame.file.empty() && frame.function.empty())
        return "a Python frame whose code object was not recorded";
    const std::string file = frame.file.empty() ? std::string("?") : frame.file;
    const std::string function = frame.function.empty() ? std::string("?") : frame.function;
    return frame.line == 0 ? fmt::format("{} in {}", file, function)
                           : fmt::format("{}:{} in {}", file, frame.line, function);
}

} // namespace gpuleak::analyzer
