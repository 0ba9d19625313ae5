#include "python/python_debug_offsets.h"

#include <cstring>

namespace gpuleak {

namespace {

// _Py_DebugOffsets is a cookie and then only uint64_t, grouped by struct; only the groups read here are
// spelled out, the others are counted in words. Its layout changes between minor versions (3.14 added
// members inside several groups), never within one. From CPython's Include/internal/pycore_runtime.h
// (3.13) and pycore_debug_offsets.h (3.14).
struct RuntimeGroup {
    uint64_t size, finalizing, interpreters_head;
};
struct ThreadStateGroup {
    uint64_t size, prev, next, interp, current_frame, thread_id, native_thread_id, datastack_chunk, status;
};
struct InterpreterGroup313 {
    uint64_t size, id, next, threads_head, gc, imports_modules, others[7];
};
struct InterpreterGroup314 {
    uint64_t size, id, next, threads_head, threads_main, gc, imports_modules, others[9];
};
struct ObjectGroup {
    uint64_t size, ob_type;
};
struct TupleGroup {
    uint64_t size, ob_item, ob_size;
};
struct LongGroup {
    uint64_t size, lv_tag, ob_digit;
};
struct BytesGroup {
    uint64_t size, ob_size, ob_sval;
};
struct UnicodeGroup {
    uint64_t size, state, length, asciiobject_size;
};

struct DebugOffsets313 {
    char cookie[8];
    uint64_t version, free_threaded;
    RuntimeGroup runtime_state;
    InterpreterGroup313 interpreter_state;
    ThreadStateGroup thread_state;
    struct {
        uint64_t size, previous, executable, instr_ptr, localsplus, owner;
    } interpreter_frame;
    struct {
        uint64_t size, filename, name, qualname, linetable, firstlineno, argcount, localsplusnames,
            localspluskinds, co_code_adaptive;
    } code_object;
    ObjectGroup pyobject;
    uint64_t type_object[4];
    TupleGroup tuple_object;
    uint64_t list_object[3], dict_object[3], float_object[2];
    LongGroup long_object;
    BytesGroup bytes_object;
    UnicodeGroup unicode_object;
};

struct DebugOffsets314 {
    char cookie[8];
    uint64_t version, free_threaded;
    RuntimeGroup runtime_state;
    InterpreterGroup314 interpreter_state;
    ThreadStateGroup thread_state;
    struct {
        uint64_t size, previous, executable, instr_ptr, localsplus, owner, stackpointer, tlbc_index;
    } interpreter_frame;
    struct {
        uint64_t size, filename, name, qualname, linetable, firstlineno, argcount, localsplusnames,
            localspluskinds, co_code_adaptive, co_tlbc;
    } code_object;
    ObjectGroup pyobject;
    uint64_t type_object[4];
    TupleGroup tuple_object;
    uint64_t list_object[3], set_object[4], dict_object[3], float_object[2];
    LongGroup long_object;
    BytesGroup bytes_object;
    UnicodeGroup unicode_object;
};

// PyCompactUnicodeObject is PyASCIIObject followed by utf8_length and the utf8 pointer (3.12 on).
constexpr uint32_t kCompactUnicodeExtra = 16;

// Frame owners from which on a frame is the interpreter's, not Python code: FRAME_OWNED_BY_CSTACK (3) on
// 3.13, FRAME_OWNED_BY_INTERPRETER (3, then FRAME_OWNED_BY_CSTACK 4) on 3.14. The shim that
// _PyEval_EvalFrameDefault pushes below the first frame it runs is owned by FRAME_OWNED_BY_CSTACK on
// 3.13 and by FRAME_OWNED_BY_INTERPRETER on 3.14 (Python/ceval.c; frameobject.c's
// _PyFrame_IsEntryFrame tests the same owners).
constexpr uint8_t kFirstShimOwner = 3;

// The state bits of a GIL build's PyASCIIObject since 3.12: interned:2, kind:3, compact:1, ascii:1.
constexpr uint8_t kKindShift = 2, kCompactShift = 5, kAsciiShift = 6;

// A member of `width` bytes at `offset` lies inside a struct of `size` bytes.
bool inside(uint64_t offset, uint64_t width, uint64_t size) {
    return size < (1u << 20) && offset + width <= size;
}

template <class Offsets> bool plausible(const Offsets& d) {
    const auto& frame = d.interpreter_frame;
    const auto& code = d.code_object;
    return inside(d.runtime_state.finalizing, 8, d.runtime_state.size) &&
           inside(d.runtime_state.interpreters_head + 8, 8, d.runtime_state.size) &&
           inside(d.interpreter_state.imports_modules, 8, d.interpreter_state.size) &&
           inside(d.interpreter_state.threads_head, 8, d.interpreter_state.size) &&
           inside(d.thread_state.current_frame, 8, d.thread_state.size) &&
           inside(d.thread_state.next, 8, d.thread_state.size) && inside(frame.localsplus, 0, frame.size) &&
           inside(code.localsplusnames, 8, code.size) &&
           inside(d.tuple_object.ob_size, 8, d.tuple_object.size) &&
           inside(d.tuple_object.ob_item, 0, d.tuple_object.size) &&
           inside(d.long_object.lv_tag, 8, d.long_object.size) &&
           inside(d.long_object.ob_digit, 0, d.long_object.size) && inside(frame.previous, 8, frame.size) &&
           inside(frame.executable, 8, frame.size) && inside(frame.instr_ptr, 8, frame.size) &&
           inside(frame.owner, 1, frame.size) && inside(code.filename, 8, code.size) &&
           inside(code.qualname, 8, code.size) && inside(code.linetable, 8, code.size) &&
           inside(code.firstlineno, 4, code.size) && inside(code.co_code_adaptive, 0, code.size) &&
           inside(d.pyobject.ob_type, 8, d.pyobject.size) &&
           inside(d.bytes_object.ob_size, 8, d.bytes_object.size) &&
           inside(d.bytes_object.ob_sval, 1, d.bytes_object.size) &&
           inside(d.unicode_object.length, 8, d.unicode_object.asciiobject_size) &&
           inside(d.unicode_object.state, 4, d.unicode_object.asciiobject_size) &&
           inside(d.unicode_object.asciiobject_size + kCompactUnicodeExtra, 0, d.unicode_object.size);
}

template <class Offsets> void fill(const Offsets& d, bool code_tagged, PythonLayout& layout) {
    layout.runtime_finalizing = static_cast<uint32_t>(d.runtime_state.finalizing);
    // The offsets name only interpreters.head, the newest; interpreters.main follows it (pycore_runtime.h's
    // struct pyinterpreters, 3.13 and 3.14: mutex, head, main).
    layout.runtime_interpreters = static_cast<uint32_t>(d.runtime_state.interpreters_head + sizeof(uint64_t));
    layout.interpreter_modules = static_cast<uint32_t>(d.interpreter_state.imports_modules);
    // PyDictObject is PyObject_HEAD, then ma_used.
    layout.dict_used = static_cast<uint32_t>(d.pyobject.size);
    layout.interpreter_threads = static_cast<uint32_t>(d.interpreter_state.threads_head);
    layout.thread_next = static_cast<uint32_t>(d.thread_state.next);
    layout.frame_link = PythonFrameLink::thread_state;
    layout.thread_frame = static_cast<uint32_t>(d.thread_state.current_frame);
    layout.frame_previous = static_cast<uint32_t>(d.interpreter_frame.previous);
    layout.frame_code = static_cast<uint32_t>(d.interpreter_frame.executable);
    layout.frame_code_tagged = code_tagged;
    layout.frame_instruction = static_cast<uint32_t>(d.interpreter_frame.instr_ptr);
    layout.instruction_kind = PythonInstructionKind::code_unit_ptr;
    layout.frame_has_owner = true;
    layout.frame_owner = static_cast<uint32_t>(d.interpreter_frame.owner);
    layout.first_shim_owner = kFirstShimOwner;
    layout.loop_entry_kind = PythonLoopEntryKind::above_shim;
    layout.frame_locals = static_cast<uint32_t>(d.interpreter_frame.localsplus);
    layout.code_filename = static_cast<uint32_t>(d.code_object.filename);
    layout.code_qualname = static_cast<uint32_t>(d.code_object.qualname);
    layout.code_first_line = static_cast<uint32_t>(d.code_object.firstlineno);
    layout.code_line_table = static_cast<uint32_t>(d.code_object.linetable);
    layout.code_bytecode = static_cast<uint32_t>(d.code_object.co_code_adaptive);
    layout.code_local_names = static_cast<uint32_t>(d.code_object.localsplusnames);
    layout.tuple_size = static_cast<uint32_t>(d.tuple_object.ob_size);
    layout.tuple_items = static_cast<uint32_t>(d.tuple_object.ob_item);
    layout.long_size = static_cast<uint32_t>(d.long_object.lv_tag);
    layout.long_size_tagged = true;
    layout.long_digits = static_cast<uint32_t>(d.long_object.ob_digit);
    layout.object_type = static_cast<uint32_t>(d.pyobject.ob_type);
    layout.bytes_size = static_cast<uint32_t>(d.bytes_object.ob_size);
    layout.bytes_data = static_cast<uint32_t>(d.bytes_object.ob_sval);
    layout.unicode_length = static_cast<uint32_t>(d.unicode_object.length);
    layout.unicode_state = static_cast<uint32_t>(d.unicode_object.state);
    layout.unicode_ascii_data = static_cast<uint32_t>(d.unicode_object.asciiobject_size);
    layout.unicode_compact_data = layout.unicode_ascii_data + kCompactUnicodeExtra;
    layout.unicode_kind_shift = kKindShift;
    layout.unicode_compact_shift = kCompactShift;
    layout.unicode_ascii_shift = kAsciiShift;
}

template <class Offsets>
DebugOffsetsResult read_as(const void* runtime, bool code_tagged, PythonLayout& layout) {
    Offsets offsets;
    std::memcpy(&offsets, runtime, sizeof offsets);
    if (offsets.free_threaded != 0)
        return DebugOffsetsResult::free_threaded;
    if (!plausible(offsets))
        return DebugOffsetsResult::implausible;
    fill(offsets, code_tagged, layout);
    return DebugOffsetsResult::ok;
}

} // namespace

DebugOffsetsResult read_debug_offsets(const void* runtime, PythonLayout& layout, uint16_t& version) {
    struct {
        char cookie[8];
        uint64_t version;
    } head;
    std::memcpy(&head, runtime, sizeof head);
    if (std::memcmp(head.cookie, "xdebugpy", sizeof head.cookie) != 0)
        return DebugOffsetsResult::no_cookie;
    // PY_VERSION_HEX: major in bits 24-31, minor in bits 16-23.
    version = static_cast<uint16_t>(head.version >> 16 & 0xffff);
    layout = PythonLayout{};
    layout.version = version;
    switch (version) {
    case python_version(3, 13):
        return read_as<DebugOffsets313>(runtime, false, layout);
    case python_version(3, 14):
        // f_executable became a _PyStackRef: a tagged pointer.
        return read_as<DebugOffsets314>(runtime, true, layout);
    default:
        return DebugOffsetsResult::unknown_version;
    }
}

} // namespace gpuleak
