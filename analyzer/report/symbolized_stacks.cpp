#include "report/symbolized_stacks.h"

#include <filesystem>

#include "python/program_files.h"
#include "report/python_interleave.h"

namespace gpuleak::analyzer {

namespace {

// libgpuleak.so and the PyTorch adapter, libgpuleak_torch-<hash>.so, with the std::function glue it was
// called through, which is compiled into it.
bool is_gpuleak_module(const std::string& path) {
    return std::filesystem::path(path).filename().string().starts_with("libgpuleak");
}

std::vector<ReportFrame> report_frames(const PythonStacks& python, const NamedSources& named,
                                       SourceFiles& files, const std::vector<PythonLocation>& locations) {
    std::vector<ReportFrame> frames;
    frames.reserve(locations.size());
    for (const PythonLocation& location : locations) {
        const PythonFunction& function = python.function(location.function);
        ReportFrame& frame = frames.emplace_back();
        frame.function = function.qualname;
        frame.file = function.file;
        frame.line = location.line;
        frame.python = true;
        if (std::optional<NamedLine> source = named.find(function.file, location.line)) {
            frame.source_name = std::move(source->name);
            frame.source_line = std::move(source->text);
        } else if (is_program_file(function.file)) {
            frame.source_line = files.line(function.file, location.line);
        }
    }
    return frames;
}

} // namespace

SymbolizedStacks::SymbolizedStacks(const TraceReader& trace, std::shared_ptr<ModuleRegistry> modules)
    : addresses_(trace.stacks()), python_(trace), named_(trace),
      symbolizer_(trace.modules(), std::move(modules)) {}

void SymbolizedStacks::read_ahead(const std::stop_token& stop) {
    std::vector<uint64_t> addresses;
    for (const auto& [stack_id, stack] : addresses_)
        addresses.insert(addresses.end(), stack.begin(), stack.end());
    symbolizer_.read_ahead(addresses, stop);
}

const std::vector<ReportFrame>& SymbolizedStacks::frames(uint32_t stack_id) {
    auto cached = cache_.find(stack_id);
    if (cached != cache_.end())
        return cached->second;
    std::vector<ReportFrame>& frames = cache_[stack_id];
    auto stack = addresses_.find(stack_id);
    if (stack == addresses_.end())
        return frames;
    for (uint64_t address : stack->second) {
        for (const SourceFrame& source : symbolizer_.symbolize(address)) {
            if (is_gpuleak_module(source.module))
                continue;
            ReportFrame& frame = frames.emplace_back();
            frame.function = source.function;
            frame.file = source.file;
            frame.line = source.line;
            frame.module = source.module;
            frame.module_offset = source.module_offset;
            frame.inlined = source.inlined;
        }
    }
    const std::vector<PythonLocation>& python = python_.of(stack_id);
    if (!python.empty())
        frames = interleave_python_frames(frames, report_frames(python_, named_, files_, python),
                                          python_.loop_entries(stack_id));
    return frames;
}

} // namespace gpuleak::analyzer
