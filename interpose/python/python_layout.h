// Where one CPython minor version keeps what the Python stack walker and the code-object reader read.
// Offsets are in bytes from the start of the struct named in each comment. The layouts of 3.10-3.12
// come from python_offsets_generated.h (scripts/gen_python_offsets.py compiles against each version's
// own headers); those of 3.13 and later from the interpreter's _Py_DebugOffsets at run time.
// 64-bit Linux, release builds with the GIL only: elsewhere the structs differ.
#pragma once

#include <cstdint>

#include "python/python_frame.h"

namespace gpuleak {

// How a thread state leads to its innermost frame.
enum class PythonFrameLink : uint8_t {
    thread_state,  // PyThreadState holds the frame pointer itself (3.10 frame, 3.13+ current_frame)
    through_cframe // PyThreadState holds a _PyCFrame pointer that holds current_frame (3.11, 3.12)
};

// What a frame records about where it is in its code.
enum class PythonInstructionKind : uint8_t {
    last_index,    // int: index in code units of the instruction last started, -1 before the first (3.10)
    code_unit_ptr, // _Py_CODEUNIT*: an address inside the code object's bytecode (3.11+)
};

// How the walker tells a loop entry: the first frame that its run of the evaluation loop ran
// (format::kPythonFrameLoopEntry).
enum class PythonLoopEntryKind : uint8_t {
    every_frame, // each frame has a loop of its own (3.10)
    is_entry,    // the frame's is_entry flag (3.11)
    above_shim,  // the frame whose previous frame is a shim, which each loop pushes first (3.12+)
};

struct PythonLayout {
    uint16_t version = 0;

    uint32_t runtime_finalizing = 0;   // _PyRuntimeState: the thread state that finalizes, or null
    uint32_t runtime_interpreters = 0; // _PyRuntimeState: interpreters.main, the initial interpreter
    uint32_t interpreter_modules = 0;  // PyInterpreterState: sys.modules, a dict
    uint32_t dict_used = 0;            // PyDictObject: ma_used, its number of items
    uint32_t interpreter_threads = 0;  // PyInterpreterState: the newest of its thread states
    uint32_t thread_next = 0;          // PyThreadState: the thread state made before it, or null

    PythonFrameLink frame_link = PythonFrameLink::thread_state;
    uint32_t thread_frame = 0;         // PyThreadState: the frame, or the _PyCFrame (see frame_link)
    uint32_t cframe_current_frame = 0; // _PyCFrame, through_cframe only

    // PyFrameObject on 3.10, _PyInterpreterFrame from 3.11 on.
    uint32_t frame_previous = 0;
    uint32_t frame_code = 0;
    bool frame_code_tagged = false; // 3.14: a _PyStackRef whose two low bits are tags
    uint32_t frame_instruction = 0;
    PythonInstructionKind instruction_kind = PythonInstructionKind::last_index;
    bool frame_has_owner = false; // 3.10 frames have no owner
    uint32_t frame_owner = 0;     // char
    // Frames whose owner is at least this are the interpreter's shims, not Python code: the C stack's
    // (3.12, 3.13) or the interpreter's (3.14), which each evaluation loop pushes below the first frame
    // it runs. 0xff: no such frames (3.11).
    uint8_t first_shim_owner = 0xff;
    PythonLoopEntryKind loop_entry_kind = PythonLoopEntryKind::every_frame;
    uint32_t frame_is_entry = 0; // bool, is_entry layouts only
    uint32_t frame_locals = 0;   // the local variables, arguments first, as object pointers (tagged as
                                 // frame_code where frame_code_tagged)

    // PyCodeObject. 3.10 has no qualified name: code_qualname is co_name there.
    uint32_t code_filename = 0;
    uint32_t code_qualname = 0;
    uint32_t code_first_line = 0;  // int
    uint32_t code_line_table = 0;  // bytes: co_linetable
    uint32_t code_bytecode = 0;    // co_code_adaptive, code_unit_ptr layouts only
    uint32_t code_local_names = 0; // a tuple of str naming frame_locals' slots: co_varnames on 3.10,
                                   // co_localsplusnames from 3.11

    uint32_t tuple_size = 0;  // PyTupleObject: ob_size
    uint32_t tuple_items = 0; // PyTupleObject: ob_item

    // PyLongObject: ob_size, the signed count of 30-bit digits (3.10, 3.11), or lv_tag, the count shifted
    // left by 3 above the sign (3.12 on: 0 positive, 1 zero, 2 negative); then the digits, least first.
    uint32_t long_size = 0;
    bool long_size_tagged = false;
    uint32_t long_digits = 0;

    uint32_t object_type = 0; // PyObject: ob_type

    uint32_t bytes_size = 0; // PyBytesObject: ob_size
    uint32_t bytes_data = 0; // PyBytesObject: ob_sval

    uint32_t unicode_length = 0;       // PyASCIIObject: length in code points
    uint32_t unicode_state = 0;        // PyASCIIObject: the 32-bit state bit field
    uint32_t unicode_ascii_data = 0;   // sizeof(PyASCIIObject): where a compact ASCII string's data start
    uint32_t unicode_compact_data = 0; // sizeof(PyCompactUnicodeObject): other compact strings' data
    uint8_t unicode_kind_shift = 0;    // state bits: kind (3 bits: 1, 2 or 4 bytes a code point),
    uint8_t unicode_compact_shift = 0; // compact (data follow the struct) and ascii (1 bit each)
    uint8_t unicode_ascii_shift = 0;
};

} // namespace gpuleak
