// Source lines of Python frames: from the line table the recorder copied out of a code object
// (co_linetable) and the frame's instruction offset, the line CPython itself would report
// (frame.f_lineno, traceback.extract_stack()).
#pragma once

#include <cstdint>
#include <optional>
#include <span>

namespace gpuleak::analyzer {

// The line of the instruction `instruction_offset` bytes into the code object's bytecode (or of
// format::kPythonOffsetBeforeFirstInstruction: `first_line`), for a line table of CPython
// `python_version` (major << 8 | minor): 3.10's (start delta, line delta) pairs, or the location table
// of 3.11 and later. Empty where CPython has no line either (None), for an offset past the table, for a
// table that is not well formed or a version before 3.10.
// Whether any instruction of the code object has a source location. CPython's own trampolines (3.12's
// "<shim>" code objects, 3.13's _Py_InitCleanup, which runs after an __init__ that a specialized call
// ran inline) have none: they run no code of the program, and traceback leaves their frames out.
bool python_code_has_locations(std::span<const uint8_t> line_table, uint16_t python_version);

std::optional<int32_t> python_line_at(std::span<const uint8_t> line_table, int32_t first_line,
                                      uint32_t instruction_offset, uint16_t python_version);

} // namespace gpuleak::analyzer
