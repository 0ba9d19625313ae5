// One Python frame as the recorder captures it and the analyzer resolves it: the recorder stores the
// code object and where in its bytecode the frame is, the analyzer turns that into a line with the code
// object's line table (copied into the trace once per code object).
#pragma once

#include <cstdint>

namespace gpuleak {

// A CPython version as (major << 8) | minor: 3.12 is 0x030c. The line table format depends on it.
constexpr uint16_t python_version(unsigned major, unsigned minor) {
    return static_cast<uint16_t>(major << 8 | minor);
}

struct PythonFrame {
    uint64_t code_object;        // the PyCodeObject's address in the recorded process
    uint32_t instruction_offset; // bytes from the start of the code object's bytecode to the current
                                 // instruction (code units are 2 bytes), or the value below
};

// The frame has not begun its first instruction (3.10's f_lasti of -1, or 3.11/3.12's prev_instr
// before the bytecode): CPython reports the code object's first line for it.
inline constexpr uint32_t kPythonOffsetBeforeFirstInstruction = UINT32_MAX;

} // namespace gpuleak
