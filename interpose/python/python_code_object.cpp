#include "python/python_code_object.h"

#include <algorithm>
#include <cstring>

#include "python/memory_read.h"
#include "python/python_runtime.h"

namespace gpuleak {

namespace {

bool has_type(const PythonRuntime& python, uintptr_t object, uintptr_t type) {
    return object != 0 && object % alignof(void*) == 0 &&
           read_at<uintptr_t>(object + python.layout.object_type) == type;
}

// The UTF-8 bytes of `code_point`, returned as their count.
size_t encode_utf8(uint32_t code_point, char (&bytes)[4]) {
    // os.fsdecode turns each byte of a file name that is not UTF-8 into one of these surrogates.
    if (code_point >= 0xdc80 && code_point <= 0xdcff) {
        bytes[0] = static_cast<char>(code_point - 0xdc00);
        return 1;
    }
    if ((code_point >= 0xd800 && code_point <= 0xdfff) || code_point > 0x10ffff)
        code_point = 0xfffd;
    if (code_point < 0x80) {
        bytes[0] = static_cast<char>(code_point);
        return 1;
    }
    if (code_point < 0x800) {
        bytes[0] = static_cast<char>(0xc0 | code_point >> 6);
        bytes[1] = static_cast<char>(0x80 | (code_point & 0x3f));
        return 2;
    }
    if (code_point < 0x10000) {
        bytes[0] = static_cast<char>(0xe0 | code_point >> 12);
        bytes[1] = static_cast<char>(0x80 | (code_point >> 6 & 0x3f));
        bytes[2] = static_cast<char>(0x80 | (code_point & 0x3f));
        return 3;
    }
    bytes[0] = static_cast<char>(0xf0 | code_point >> 18);
    bytes[1] = static_cast<char>(0x80 | (code_point >> 12 & 0x3f));
    bytes[2] = static_cast<char>(0x80 | (code_point >> 6 & 0x3f));
    bytes[3] = static_cast<char>(0x80 | (code_point & 0x3f));
    return 4;
}

// Copies the str object at `text` into `out` as UTF-8. Only compact strings (data right after the
// header, as every str that CPython 3.12+ makes and that code objects hold in older versions) are read.
bool copy_text(const PythonRuntime& python, uintptr_t text, std::span<char> out, uint32_t& size,
               bool& truncated) {
    if (!has_type(python, text, python.unicode_type))
        return false;
    const PythonLayout& layout = python.layout;
    const auto state = read_at<uint32_t>(text + layout.unicode_state);
    const unsigned kind = state >> layout.unicode_kind_shift & 7;
    const bool compact = (state >> layout.unicode_compact_shift & 1) != 0;
    const bool ascii = (state >> layout.unicode_ascii_shift & 1) != 0;
    const auto length = read_at<int64_t>(text + layout.unicode_length);
    if (!compact || length < 0 || (kind != 1 && kind != 2 && kind != 4) || (ascii && kind != 1))
        return false;

    const uintptr_t data = text + (ascii ? layout.unicode_ascii_data : layout.unicode_compact_data);
    size_t written = 0;
    if (ascii) {
        written = std::min(static_cast<size_t>(length), out.size());
        copy_at(out.data(), data, written);
        truncated |= written < static_cast<size_t>(length);
    } else {
        for (int64_t i = 0; i < length; ++i) {
            const uintptr_t at = data + static_cast<uintptr_t>(i) * kind;
            const uint32_t code_point = kind == 1   ? read_at<uint8_t>(at)
                                        : kind == 2 ? read_at<uint16_t>(at)
                                                    : read_at<uint32_t>(at);
            char bytes[4];
            const size_t count = encode_utf8(code_point, bytes);
            if (written + count > out.size()) {
                truncated = true;
                break;
            }
            std::memcpy(out.data() + written, bytes, count);
            written += count;
        }
    }
    size = static_cast<uint32_t>(written);
    return true;
}

// Copies the data of a bytes object, up to `out.size()` bytes, its header read at `header` (the object,
// or a copy of its header) and its data at `data` in the process, through `copy_data(out, data, count)`.
template <typename CopyData>
bool copy_bytes_data(const PythonRuntime& python, uintptr_t header, uintptr_t data, std::span<uint8_t> out,
                     uint32_t& size, bool& truncated, CopyData copy_data) {
    if (!has_type(python, header, python.bytes_type))
        return false;
    const auto length = read_at<int64_t>(header + python.layout.bytes_size);
    if (length < 0)
        return false;
    const size_t copied = std::min(static_cast<size_t>(length), out.size());
    if (!copy_data(out.data(), data, copied))
        return false;
    truncated |= copied < static_cast<size_t>(length);
    size = static_cast<uint32_t>(copied);
    return true;
}

bool copy_bytes(const PythonRuntime& python, uintptr_t bytes, std::span<uint8_t> out, uint32_t& size,
                bool& truncated) {
    return copy_bytes_data(python, bytes, bytes + python.layout.bytes_data, out, size, truncated,
                           [](uint8_t* to, uintptr_t from, size_t count) {
                               copy_at(to, from, count);
                               return true;
                           });
}

PythonCodeIdentity read_fields(const PythonLayout& layout, uintptr_t code) {
    PythonCodeIdentity identity;
    identity.filename = read_at<uintptr_t>(code + layout.code_filename);
    identity.qualname = read_at<uintptr_t>(code + layout.code_qualname);
    identity.line_table = read_at<uintptr_t>(code + layout.code_line_table);
    identity.first_line = read_at<int32_t>(code + layout.code_first_line);
    return identity;
}

bool read_identity(const PythonRuntime& python, uintptr_t code, PythonCodeIdentity& identity) {
    if (!has_type(python, code, python.code_type))
        return false;
    identity = read_fields(python.layout, code);
    return true;
}

// Where describe_other_threads_code reads: an object of up to this many bytes, copied through the kernel
// into one of ours, which the readers above then read as they read any object.
constexpr size_t kCopiedObjectBytes = 4096;

struct alignas(8) CopiedObject {
    unsigned char bytes[kCopiedObjectBytes];
    [[nodiscard]] uintptr_t address() const { return reinterpret_cast<uintptr_t>(bytes); }
};

// Copies the str object at `text` as copy_text does, reading it through copy_checked: its first
// `out.size()` code points, or fewer where more would not fit the copy.
bool copy_text_checked(const PythonRuntime& python, uintptr_t text, std::span<char> out, uint32_t& size,
                       bool& truncated) {
    const PythonLayout& layout = python.layout;
    CopiedObject copy;
    if (text == 0 || layout.unicode_compact_data > kCopiedObjectBytes ||
        !copy_checked(copy.bytes, text, layout.unicode_ascii_data))
        return false;
    const auto state = read_at<uint32_t>(copy.address() + layout.unicode_state);
    const unsigned kind = state >> layout.unicode_kind_shift & 7;
    const bool ascii = (state >> layout.unicode_ascii_shift & 1) != 0;
    const uint32_t data = ascii ? layout.unicode_ascii_data : layout.unicode_compact_data;
    if (!ascii && !copy_checked(copy.bytes + layout.unicode_ascii_data, text + layout.unicode_ascii_data,
                                layout.unicode_compact_data - layout.unicode_ascii_data))
        return false;
    const auto length = read_at<int64_t>(copy.address() + layout.unicode_length);
    if (length < 0 || (kind != 1 && kind != 2 && kind != 4))
        return false;
    const size_t fits = std::min((kCopiedObjectBytes - data) / kind, out.size());
    const size_t copied = std::min(static_cast<size_t>(length), fits);
    if (!copy_checked(copy.bytes + data, text + data, copied * kind))
        return false;
    truncated |= copied < static_cast<size_t>(length);
    const auto copied_length = static_cast<int64_t>(copied);
    std::memcpy(copy.bytes + layout.unicode_length, &copied_length, sizeof copied_length);
    return copy_text(python, copy.address(), out, size, truncated);
}

// Copies the bytes object at `bytes` as copy_bytes does, reading it through copy_checked.
bool copy_bytes_checked(const PythonRuntime& python, uintptr_t bytes, std::span<uint8_t> out, uint32_t& size,
                        bool& truncated) {
    const PythonLayout& layout = python.layout;
    CopiedObject copy;
    const uint32_t header = std::max(layout.bytes_data, layout.bytes_size + uint32_t{sizeof(int64_t)});
    return bytes != 0 && header <= kCopiedObjectBytes && copy_checked(copy.bytes, bytes, header) &&
           copy_bytes_data(
               python, copy.address(), bytes + layout.bytes_data, out, size, truncated,
               [](uint8_t* to, uintptr_t from, size_t count) { return copy_checked(to, from, count); });
}

// The bytes of a code object up to the last of its fields that the readers read.
uint32_t code_fields_end(const PythonLayout& layout) {
    return std::max({layout.code_filename, layout.code_qualname, layout.code_line_table,
                     layout.code_first_line, layout.code_local_names, layout.object_type}) +
           uint32_t{sizeof(uint64_t)};
}

} // namespace

bool read_other_threads_code_identity(uint64_t code_object, PythonCodeIdentity& identity,
                                      uint64_t* local_names) {
    const PythonRuntime* python = python_runtime(true);
    if (python == nullptr)
        return false;
    const PythonLayout& layout = python->layout;
    const uint32_t fields_end = code_fields_end(layout);
    CopiedObject copy;
    if (code_object == 0 || fields_end > kCopiedObjectBytes ||
        !copy_checked(copy.bytes, code_object, fields_end) ||
        !has_type(*python, copy.address(), python->code_type))
        return false;
    identity = read_fields(layout, copy.address());
    if (local_names != nullptr)
        *local_names = read_at<uintptr_t>(copy.address() + layout.code_local_names);
    return true;
}

bool describe_other_threads_code(uint64_t code_object, std::span<char> filename, std::span<char> qualname,
                                 PythonCodeDescription& description, uint64_t* local_names) {
    const PythonRuntime* python = python_runtime(true);
    description = PythonCodeDescription{};
    return python != nullptr &&
           read_other_threads_code_identity(code_object, description.identity, local_names) &&
           copy_text_checked(*python, description.identity.filename, filename, description.filename_size,
                             description.truncated) &&
           copy_text_checked(*python, description.identity.qualname, qualname, description.qualname_size,
                             description.truncated);
}

bool describe_other_threads_code(uint64_t code_object, const PythonCodeBuffers& buffers,
                                 PythonCodeDescription& description) {
    const PythonRuntime* python = python_runtime(true);
    return describe_other_threads_code(code_object, buffers.filename, buffers.qualname, description) &&
           copy_bytes_checked(*python, description.identity.line_table, buffers.line_table,
                              description.line_table_size, description.truncated);
}

bool other_threads_text_equals(uint64_t text, std::string_view expected) {
    const PythonRuntime* python = python_runtime(true);
    char copied[64];
    uint32_t size = 0;
    bool truncated = false;
    return python != nullptr && expected.size() < sizeof copied &&
           copy_text_checked(*python, text, copied, size, truncated) && !truncated &&
           std::string_view(copied, size) == expected;
}

bool read_python_code_identity(uint64_t code_object, PythonCodeIdentity& identity) {
    const PythonRuntime* python = python_runtime();
    return python != nullptr && read_identity(*python, code_object, identity);
}

PythonCodeIdentity read_captured_code_identity(const PythonRuntime& python, uint64_t code_object) {
    return read_fields(python.layout, code_object);
}

bool describe_python_code(uint64_t code_object, const PythonCodeBuffers& buffers,
                          PythonCodeDescription& description) {
    const PythonRuntime* python = python_runtime();
    if (python == nullptr)
        return false;
    description = PythonCodeDescription{};
    return read_identity(*python, code_object, description.identity) &&
           copy_text(*python, description.identity.filename, buffers.filename, description.filename_size,
                     description.truncated) &&
           copy_text(*python, description.identity.qualname, buffers.qualname, description.qualname_size,
                     description.truncated) &&
           copy_bytes(*python, description.identity.line_table, buffers.line_table,
                      description.line_table_size, description.truncated);
}

} // namespace gpuleak
