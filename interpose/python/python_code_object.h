// What the trace keeps of a Python code object the first time a stack holds it (file, qualified name,
// first line, line table), and what tells it apart from a later code object at the same address.
//
// Only for code objects of the calling thread's stack, captured by capture_python_frames in the same
// hook call: those are alive until the hook returns. Any other address may have been freed (and its
// memory unmapped). Plain memory reads, as capture_python_frames.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>

namespace gpuleak {

// Code objects are freed and their addresses reused: a cached code object is the same one while these
// still match (the strings and the line table are objects of their own, freed with it).
struct PythonCodeIdentity {
    uint64_t filename = 0;   // the str objects' addresses
    uint64_t qualname = 0;   // co_name on 3.10, which has no qualified names
    uint64_t line_table = 0; // the bytes object's address
    int32_t first_line = 0;
    bool operator==(const PythonCodeIdentity&) const = default;
};

// False when `code_object` is not a code object, or Python frames cannot be read in this process.
bool read_python_code_identity(uint64_t code_object, PythonCodeIdentity& identity);

struct PythonRuntime;

// The same for a code object that capture_python_frames returned, which checked its type already: the
// recorder's hot path reads one identity per frame of every stack.
PythonCodeIdentity read_captured_code_identity(const PythonRuntime& python, uint64_t code_object);

// Where describe_python_code copies the strings (UTF-8, no terminator; lone surrogates U+DC80-U+DCFF,
// which stand for undecodable bytes of file names, become those bytes again, as os.fsencode does) and
// the line table (co_linetable's bytes, decoded by analyzer/python_line_table.h).
struct PythonCodeBuffers {
    std::span<char> filename;
    std::span<char> qualname;
    std::span<uint8_t> line_table;
};

struct PythonCodeDescription {
    PythonCodeIdentity identity;
    uint32_t filename_size = 0; // bytes written to each buffer
    uint32_t qualname_size = 0;
    uint32_t line_table_size = 0;
    bool truncated = false; // something did not fit its buffer: strings end at a whole character
};

// False when `code_object` is not a code object, its strings are not of a known representation, or
// Python frames cannot be read in this process.
bool describe_python_code(uint64_t code_object, const PythonCodeBuffers& buffers,
                          PythonCodeDescription& description);

// read_python_code_identity for a code object on another thread's stack, read as
// describe_other_threads_code reads; `local_names` as there.
bool read_other_threads_code_identity(uint64_t code_object, PythonCodeIdentity& identity,
                                      uint64_t* local_names = nullptr);

// The file name and qualified name of a code object on another thread's stack: that thread runs on
// meanwhile and may free it, so every read goes through the kernel (copy_checked, a system call each),
// and fails where the memory is gone. Strings are copied as describe_python_code copies them; the line
// table is not read. `local_names`, when given, receives the address of the tuple that names its
// frames' local variables (PythonLayout::code_local_names). Asks for the interpreter quietly.
bool describe_other_threads_code(uint64_t code_object, std::span<char> filename, std::span<char> qualname,
                                 PythonCodeDescription& description, uint64_t* local_names = nullptr);

// describe_python_code for a code object on another thread's stack: as describe_other_threads_code reads
// it, with its line table.
bool describe_other_threads_code(uint64_t code_object, const PythonCodeBuffers& buffers,
                                 PythonCodeDescription& description);

// Whether the str object at `text`, of another thread's, read as describe_other_threads_code reads, is
// `expected` (shorter than 64 bytes).
bool other_threads_text_equals(uint64_t text, std::string_view expected);

} // namespace gpuleak
