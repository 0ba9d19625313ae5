#include "python/python_stacks.h"

#include <unordered_map>
#include <utility>

#include "python/python_line_table.h"

namespace gpuleak::analyzer {

namespace {

struct ResolvedCode {
    uint32_t function = 0;
    const CodeObject* code = nullptr;
    // An interpreter trampoline (python_code_has_locations): left out, as traceback leaves it out.
    bool trampoline = false;
};

} // namespace

PythonStacks::PythonStacks(const TraceReader& trace) {
    std::map<std::pair<std::string, std::string>, uint32_t> interned;
    std::unordered_map<uint32_t, ResolvedCode> codes;
    const uint16_t version = trace.header().python_version;
    for (const auto& [id, code] : trace.code_objects()) {
        auto [entry, added] =
            interned.try_emplace({code.filename, code.qualname}, static_cast<uint32_t>(functions_.size()));
        if (added)
            functions_.push_back({code.filename, code.qualname});
        codes[id] = {entry->second, &code, !python_code_has_locations(code.line_table, version)};
    }
    // Stacks share most of their frames, and a line costs a walk of the line table: each is found once.
    std::unordered_map<uint64_t, uint32_t> lines;
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
        Stack& stack = stacks_[stack_id];
        stack.locations.reserve(frames.size());
        stack.loop_entries.reserve(frames.size());
        for (const PythonFrame& frame : frames) {
            auto code = codes.find(frame.code_id);
            if (code != codes.end() && code->second.trampoline) {
                // The run it was part of now begins at the frame it called.
                if (frame.loop_entry && !stack.loop_entries.empty())
                    stack.loop_entries.back() = true;
                continue;
            }
            if (code == codes.end())
                stack.locations.push_back({});
            else
                stack.locations.push_back({code->second.function, line_of(frame, *code->second.code)});
            stack.loop_entries.push_back(frame.loop_entry);
        }
    }
}

const std::vector<PythonLocation>& PythonStacks::of(uint32_t stack_id) const {
    static const std::vector<PythonLocation> kNone;
    auto found = stacks_.find(stack_id);
    return found == stacks_.end() ? kNone : found->second.locations;
}

const std::vector<bool>& PythonStacks::loop_entries(uint32_t stack_id) const {
    static const std::vector<bool> kNone;
    auto found = stacks_.find(stack_id);
    return found == stacks_.end() ? kNone : found->second.loop_entries;
}

} // namespace gpuleak::analyzer
