#include "python_stacks.h"

#include <unordered_map>
#include <utility>

#include "python_line_table.h"

namespace gpuleak::analyzer {

namespace {

struct ResolvedCode {
    uint32_t function = 0;
    const CodeObject* code = nullptr;
};

} // namespace

PythonStacks::PythonStacks(const TraceReader& trace) {
    std::map<std::pair<std::string, std::string>, uint32_t> interned;
    std::unordered_map<uint32_t, ResolvedCode> codes;
    for (const auto& [id, code] : trace.code_objects()) {
        auto [entry, added] =
            interned.try_emplace({code.filename, code.qualname}, static_cast<uint32_t>(functions_.size()));
        if (added)
            functions_.push_back({code.filename, code.qualname});
        codes[id] = {entry->second, &code};
    }
    // Stacks share most of their frames, and a line costs a walk of the line table: each is found once.
    std::unordered_map<uint64_t, uint32_t> lines;
    const uint16_t version = trace.header().python_version;
    const auto line_of = [&](const PythonFrame& frame, const CodeObject& code) {
        const uint64_t key = uint64_t{frame.code_id} << 32 | frame.instruction_offset;
        auto [cached, added] = lines.try_emplace(key, 0);
        if (added) {
            const std::optional<int32_t> line =
                python_line_at(code.line_table, code.first_line, frame.instruction_offset, version);
            cached->second = line && *line > 0 ? static_cast<uint32_t>(*line) : 0;
        }
        return cached->second;
    };
    for (const auto& [stack_id, frames] : trace.python_stacks()) {
        std::vector<PythonLocation>& locations = stacks_[stack_id];
        locations.reserve(frames.size());
        for (const PythonFrame& frame : frames) {
            auto code = codes.find(frame.code_id);
            if (code == codes.end())
                locations.push_back({});
            else
                locations.push_back({code->second.function, line_of(frame, *code->second.code)});
        }
    }
}

const std::vector<PythonLocation>& PythonStacks::of(uint32_t stack_id) const {
    static const std::vector<PythonLocation> kNone;
    auto found = stacks_.find(stack_id);
    return found == stacks_.end() ? kNone : found->second;
}

} // namespace gpuleak::analyzer
