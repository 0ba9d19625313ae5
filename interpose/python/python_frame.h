// One Python frame as the recorder captures it: the code object and where in its bytecode the frame
// is. The recorder turns the code object into a code id of the trace (python_code_table.h).
#pragma once

#include <cstdint>

#include "gpuleak/trace_format.h"

namespace gpuleak {

using format::kPythonOffsetBeforeFirstInstruction;
using format::python_version;

struct PythonFrame {
    uint64_t code_object;        // the PyCodeObject's address in this process
    uint32_t instruction_offset; // bytes from the start of the bytecode to the current instruction
                                 // (code units are 2 bytes), or kPythonOffsetBeforeFirstInstruction
    bool loop_entry;             // the first frame its evaluation loop ran (format::kPythonFrameLoopEntry)
};

} // namespace gpuleak
