// Loaded into a Python interpreter with ctypes.CDLL by test_python_stacks.py: captures the calling
// thread's Python stack with the recorder's walker and resolves it as the analyzer does, so that the
// test can hold it against traceback.extract_stack(). ctypes releases the GIL around each call, as
// PyTorch's bindings do around the allocations the recorder sees.
#include <climits>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <pthread.h>
#include <unistd.h>
#include <vector>

#include "python/python_code_object.h"
#include "python/python_frames.h"
#include "python/python_line_table.h"
#include "python/python_runtime.h"

namespace {

using namespace gpuleak;

// What test_python_stacks.py's ProbeFrame mirrors.
struct ProbeFrame {
    uint64_t code_object;
    uint32_t instruction_offset;
    int32_t line; // INT32_MIN: no line
    uint32_t filename_size;
    uint32_t qualname_size;
    uint8_t described; // 0: describe_python_code failed
    uint8_t truncated;
    uint8_t loop_entry;
    char filename[1024];
    char qualname[512];
};

ProbeFrame resolve(const PythonFrame& frame, uint16_t version) {
    ProbeFrame resolved{};
    resolved.code_object = frame.code_object;
    resolved.instruction_offset = frame.instruction_offset;
    resolved.loop_entry = frame.loop_entry;
    resolved.line = INT32_MIN;
    uint8_t line_table[16384];
    PythonCodeDescription description;
    const PythonCodeBuffers buffers{resolved.filename, resolved.qualname, line_table};
    if (!describe_python_code(frame.code_object, buffers, description))
        return resolved;
    resolved.described = 1;
    resolved.truncated = description.truncated;
    resolved.filename_size = description.filename_size;
    resolved.qualname_size = description.qualname_size;
    const auto line =
        analyzer::python_line_at(std::span(line_table, description.line_table_size),
                                 description.identity.first_line, frame.instruction_offset, version);
    resolved.line = line.value_or(INT32_MIN);
    return resolved;
}

void* count_frames(void* count) {
    PythonFrame frames[8];
    bool finalizing = false;
    *static_cast<size_t*>(count) = capture_python_frames(frames, 8, finalizing);
    return nullptr;
}

PythonCodeIdentity g_remembered;

} // namespace

// The library is built with hidden visibility: only these functions are for ctypes.
#define PROBE_API __attribute__((visibility("default")))

extern "C" {

// major << 8 | minor of the Python the walker reads, 0 when it reads none.
PROBE_API uint32_t gpuleak_probe_python_version() {
    const PythonRuntime* python = python_runtime();
    return python != nullptr ? python->layout.version : 0;
}

// The calling thread's stack, innermost first, at most `max` frames; returns the count.
PROBE_API size_t gpuleak_probe_stack(ProbeFrame* out, size_t max) {
    std::vector<PythonFrame> frames(max);
    bool finalizing = false;
    const size_t count = capture_python_frames(frames.data(), max, finalizing);
    const uint16_t version = static_cast<uint16_t>(gpuleak_probe_python_version());
    for (size_t i = 0; i < count; ++i)
        out[i] = resolve(frames[i], version);
    return count;
}

// Frames captured without resolving them: the hot path alone.
PROBE_API size_t gpuleak_probe_count() {
    PythonFrame frames[256];
    bool finalizing = false;
    return capture_python_frames(frames, 256, finalizing);
}

// Whether the walker sees the interpreter finalizing, by itself and from a walk of the calling thread.
PROBE_API int gpuleak_probe_finalizing() {
    PythonFrame frames[8];
    bool seen_by_walk = false;
    capture_python_frames(frames, 8, seen_by_walk);
    return (python_finalizing() ? 1 : 0) | (seen_by_walk ? 2 : 0);
}

// Frames that a thread created here, which never ran Python, captures.
PROBE_API size_t gpuleak_probe_count_in_native_thread() {
    size_t count = SIZE_MAX;
    pthread_t thread;
    if (pthread_create(&thread, nullptr, count_frames, &count) != 0)
        return SIZE_MAX;
    pthread_join(thread, nullptr);
    return count;
}

// Writes "frames N innermost QUALNAME\n" to `fd` with write(2): usable before the interpreter starts and
// while it finalizes.
PROBE_API void gpuleak_probe_report(int fd) {
    const size_t count = gpuleak_probe_count();
    ProbeFrame innermost{};
    gpuleak_probe_stack(&innermost, 1);
    char line[700];
    const int size = std::snprintf(line, sizeof line, "frames %zu innermost %.*s\n", count,
                                   static_cast<int>(innermost.qualname_size), innermost.qualname);
    if (size > 0 && write(fd, line, static_cast<size_t>(size)) < 0)
        std::abort();
}

// Reports to stderr from a C atexit handler: after the interpreter finalized.
PROBE_API void gpuleak_probe_report_at_exit() {
    std::atexit([] { gpuleak_probe_report(STDERR_FILENO); });
}

// Preloaded with GPULEAK_PROBE_AT_LOAD set: what the walker finds before the interpreter starts.
__attribute__((constructor)) static void report_at_load() {
    if (std::getenv("GPULEAK_PROBE_AT_LOAD") != nullptr)
        gpuleak_probe_report(STDERR_FILENO);
}

// The line the analyzer gives `offset` in `table`; false when it gives none.
PROBE_API bool gpuleak_probe_line_at(const uint8_t* table, size_t size, int32_t first_line, uint32_t offset,
                                     uint32_t version, int32_t* line) {
    const auto found =
        analyzer::python_line_at(std::span(table, size), first_line, offset, static_cast<uint16_t>(version));
    *line = found.value_or(0);
    return found.has_value();
}

// Remembers the identity of the live code object at `code`, then tells whether the code object now at
// an address is the one remembered.
PROBE_API bool gpuleak_probe_remember_code(uint64_t code) {
    return read_python_code_identity(code, g_remembered);
}
PROBE_API bool gpuleak_probe_is_remembered_code(uint64_t code) {
    PythonCodeIdentity identity;
    return read_python_code_identity(code, identity) && identity == g_remembered;
}

} // extern "C"
