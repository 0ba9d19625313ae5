#include "symbolized_stacks.h"

#include <filesystem>

namespace gpuleak::analyzer {

namespace {

bool is_gpuleak_module(const std::string& path) {
    return std::filesystem::path(path).filename() == "libgpuleak.so";
}

} // namespace

SymbolizedStacks::SymbolizedStacks(const TraceReader& trace, const std::string& debuginfo_path)
    : addresses_(trace.stacks()), symbolizer_(trace.modules(), debuginfo_path) {}

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
            frames.push_back({source.function, source.file, source.line, source.module, source.module_offset,
                              source.inlined, false});
        }
    }
    return frames;
}

} // namespace gpuleak::analyzer
