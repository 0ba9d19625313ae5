#include "report_builder.h"

#include <fmt/format.h>

#include "symbolized_stacks.h"
#include "trace_reader.h"

namespace gpuleak::analyzer {

std::string StackFrames::describe(uint32_t stack_id) {
    for (const ReportFrame& frame : frames(stack_id)) {
        if (frame.function.empty())
            continue;
        return frame.file.empty() ? frame.function
                                  : fmt::format("{} ({}:{})", frame.function, frame.file, frame.line);
    }
    const auto& all = frames(stack_id);
    return all.empty() ? std::string("an unknown place (no stack)")
                       : fmt::format("{}+{:#x}", all.front().module, all.front().module_offset);
}

std::vector<ProcessReport> build_reports(const std::vector<std::string>& trace_paths,
                                         const std::string& debuginfo_path) {
    std::vector<ProcessReport> reports;
    for (const std::string& path : trace_paths) {
        TraceReader trace = TraceReader::open(path);
        ProcessReport report;
        report.model = build_model(path, trace);
        report.stacks = std::make_unique<SymbolizedStacks>(trace, debuginfo_path);
        StackFrames& stacks = *report.stacks;
        report.diagnosis =
            diagnose(report.model, [&](uint32_t stack_id) { return stacks.describe(stack_id); });
        reports.push_back(std::move(report));
    }
    return reports;
}

} // namespace gpuleak::analyzer
