#include "python/python_runtime.h"

#include <atomic>
#include <dlfcn.h>

#include "common/warning.h"
#include "python/python_debug_offsets.h"
#include "python/python_offsets_generated.h"

namespace gpuleak {

namespace {

enum : int { kNotLooked, kLooking, kLooked };

std::atomic<int> g_state{kNotLooked};
PythonRuntime g_runtime;
bool g_supported = false;
// Why the Python found is not supported, said on stderr once, by the first caller that is not quiet.
uint16_t g_unsupported_version = 0;
const char* g_unsupported_why = nullptr;
std::atomic<bool> g_unsupported_said{false};

void* symbol(const char* name) {
    return dlsym(RTLD_DEFAULT, name);
}

// major << 8 | minor of the running interpreter: Py_Version (3.11+), else the text of Py_GetVersion(),
// a plain C function that formats constants ("3.10.13 (main, ...)"); 0 when neither makes sense.
uint16_t interpreter_version(void* get_version) {
    if (const auto* hex = static_cast<const unsigned long*>(symbol("Py_Version")))
        return static_cast<uint16_t>(*hex >> 16 & 0xffff);
    const char* text = reinterpret_cast<const char* (*)()>(get_version)();
    unsigned parts[2] = {0, 0};
    for (unsigned& part : parts) {
        if (*text < '0' || *text > '9')
            return 0;
        while (*text >= '0' && *text <= '9')
            part = part * 10 + static_cast<unsigned>(*text++ - '0');
        if (*text == '.')
            ++text;
    }
    return parts[0] < 256 && parts[1] < 256 ? python_version(parts[0], parts[1]) : 0;
}

void warn_unsupported(uint16_t version, const char* why) {
    g_unsupported_version = version;
    g_unsupported_why = why;
}

bool find_layout(uint16_t version, PythonLayout& layout) {
    for (const PythonLayout& known : kGeneratedPythonLayouts) {
        if (known.version == version) {
            layout = known;
            return true;
        }
    }
    const void* runtime = symbol("_PyRuntime");
    uint16_t described = 0;
    switch (read_debug_offsets(runtime, layout, described)) {
    case DebugOffsetsResult::ok:
        if (described == version)
            return true;
        warn_unsupported(version, "describes itself as another version in _Py_DebugOffsets");
        return false;
    case DebugOffsetsResult::free_threaded:
        warn_unsupported(version, "is a free-threaded build");
        return false;
    case DebugOffsetsResult::implausible:
        warn_unsupported(version, "has _Py_DebugOffsets unlike those of its version");
        return false;
    case DebugOffsetsResult::no_cookie:
    case DebugOffsetsResult::unknown_version:
        break;
    }
    warn_unsupported(version, "is not supported (3.10 to 3.14 are)");
    return false;
}

// Fills g_runtime; false when there is no Python or one whose frames cannot be read.
bool look_for_python() {
    void* const get_version = symbol("Py_GetVersion");
    if (get_version == nullptr)
        return false;
    const uint16_t version = interpreter_version(get_version);
    if (version < python_version(3, 10) || version > python_version(3, 14)) {
        warn_unsupported(version, "is not supported (3.10 to 3.14 are)");
        return false;
    }
    // Reference-count debugging comes with every debug build and changes the structs of 3.10-3.12.
    if (symbol("_Py_NegativeRefcount") != nullptr) {
        warn_unsupported(version, "is a debug build");
        return false;
    }
    g_runtime.runtime = reinterpret_cast<uintptr_t>(symbol("_PyRuntime"));
    g_runtime.code_type = reinterpret_cast<uintptr_t>(symbol("PyCode_Type"));
    g_runtime.unicode_type = reinterpret_cast<uintptr_t>(symbol("PyUnicode_Type"));
    g_runtime.bytes_type = reinterpret_cast<uintptr_t>(symbol("PyBytes_Type"));
    g_runtime.tuple_type = reinterpret_cast<uintptr_t>(symbol("PyTuple_Type"));
    g_runtime.long_type = reinterpret_cast<uintptr_t>(symbol("PyLong_Type"));
    g_runtime.this_thread_state = reinterpret_cast<void* (*)()>(symbol("PyGILState_GetThisThreadState"));
    if (g_runtime.runtime == 0 || g_runtime.code_type == 0 || g_runtime.unicode_type == 0 ||
        g_runtime.bytes_type == 0 || g_runtime.tuple_type == 0 || g_runtime.long_type == 0 ||
        g_runtime.this_thread_state == nullptr) {
        warn_unsupported(version, "lacks symbols that reading its frames needs");
        return false;
    }
    return find_layout(version, g_runtime.layout);
}

} // namespace

bool python_program() {
    return symbol("Py_GetVersion") != nullptr;
}

const PythonRuntime* python_runtime(bool quiet) {
    int state = g_state.load(std::memory_order_acquire);
    if (state == kNotLooked && g_state.compare_exchange_strong(state, kLooking, std::memory_order_acquire)) {
        g_supported = look_for_python();
        g_state.store(kLooked, std::memory_order_release);
        state = kLooked;
    }
    if (state != kLooked)
        return nullptr;
    if (!g_supported && g_unsupported_why != nullptr && !quiet &&
        !g_unsupported_said.exchange(true, std::memory_order_relaxed))
        warn("CPython %u.%u %s: allocations get native stacks only", g_unsupported_version >> 8,
             g_unsupported_version & 0xff, g_unsupported_why);
    return g_supported ? &g_runtime : nullptr;
}

bool python_initialized() {
    using IsInitialized = int (*)();
    static const auto is_initialized = reinterpret_cast<IsInitialized>(symbol("Py_IsInitialized"));
    return is_initialized != nullptr && is_initialized() != 0;
}

} // namespace gpuleak
