// The Python frames of a trace's stacks as source locations: file, qualified name and line, the line
// computed from the code object's line table as CPython computes frame.f_lineno. Resolved once, when
// constructed, so that it outlives the trace.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "read/trace_reader.h"

namespace gpuleak::analyzer {

struct PythonFunction {
    std::string file;     // empty: the code object is not in the trace
    std::string qualname; // co_name on 3.10
};

struct PythonLocation {
    uint32_t function = 0; // PythonStacks::function(function); 0: the unknown function
    uint32_t line = 0;     // 0: unknown
    auto operator<=>(const PythonLocation&) const = default;
};

class PythonStacks {
  public:
    explicit PythonStacks(const TraceReader& trace);

    // Innermost first; empty for a stack without Python frames.
    [[nodiscard]] const std::vector<PythonLocation>& of(uint32_t stack_id) const;
    // Whether each frame of of(stack_id) was the first its evaluation loop ran (PythonFrame::loop_entry).
    // Kept apart from the locations: it places frames among native frames, it tells no two sites apart.
    [[nodiscard]] const std::vector<bool>& loop_entries(uint32_t stack_id) const;
    // Functions are interned: two locations are in the same function exactly when their indices match.
    [[nodiscard]] const PythonFunction& function(uint32_t index) const { return functions_[index]; }
    [[nodiscard]] static bool known(const PythonLocation& location) { return location.function != 0; }

  private:
    std::vector<PythonFunction> functions_{PythonFunction{}};
    struct Stack {
        std::vector<PythonLocation> locations;
        std::vector<bool> loop_entries;
    };
    std::map<uint32_t, Stack> stacks_;
};

} // namespace gpuleak::analyzer
