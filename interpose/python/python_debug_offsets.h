// The PythonLayout of CPython 3.13 and 3.14, read from the _Py_DebugOffsets that such an interpreter
// keeps at the start of its _PyRuntime for debuggers and profilers.
#pragma once

#include <cstdint>

#include "python/python_layout.h"

namespace gpuleak {

enum class DebugOffsetsResult : uint8_t {
    ok,
    no_cookie,       // _PyRuntime does not start with "xdebugpy": not 3.13+, or not CPython
    unknown_version, // a version whose _Py_DebugOffsets layout is not known here
    free_threaded,   // a free-threaded build: frames and strings differ from the GIL build's
    implausible,     // offsets outside the structs they describe: a layout other than expected
};

// Fills `layout` from the _Py_DebugOffsets at `runtime` (the address of _PyRuntime). `version` gets
// the interpreter's major << 8 | minor whenever the cookie is there.
DebugOffsetsResult read_debug_offsets(const void* runtime, PythonLayout& layout, uint16_t& version);

} // namespace gpuleak
