#include "python/python_process_target.h"

#include <algorithm>
#include <string_view>

#include "python/memory_read.h"
#include "python/python_code_object.h"
#include "python/python_frames.h"
#include "python/python_runtime.h"

namespace gpuleak {

namespace {

// Longer chains are broken ones: a thread's stack is read while it changes.
constexpr int kMaxThreadStates = 1024;
constexpr int kMaxFrames = 4096;
// Beyond this many locals the argument looked for is not among them.
constexpr int64_t kMaxLocals = 256;

struct CodeName {
    char filename[sizeof(PythonProcessTarget::filename)];
    char qualname[sizeof(PythonProcessTarget::qualname)];
    PythonCodeDescription description;
    uint64_t local_names = 0;

    [[nodiscard]] std::string_view file() const { return {filename, description.filename_size}; }
    [[nodiscard]] std::string_view name() const { return {qualname, description.qualname_size}; }
};

bool name_code(uintptr_t code, CodeName& name) {
    return describe_other_threads_code(code, name.filename, name.qualname, name.description,
                                       &name.local_names);
}

bool dataloader_worker_loop(const CodeName& code) {
    return code.name() == "_worker_loop" && code.file().ends_with("torch/utils/data/_utils/worker.py");
}

// The thread state made first: the thread that runs the program, which in a forked child is the thread
// that forked it (the child keeps only that one).
uintptr_t first_thread_state(const PythonRuntime& python) {
    const PythonLayout& layout = python.layout;
    const uintptr_t interpreter = main_interpreter(layout, python.runtime);
    uintptr_t thread = 0;
    if (interpreter == 0 || !read_checked(interpreter + layout.interpreter_threads, thread))
        return 0;
    for (int i = 0; i < kMaxThreadStates && thread != 0; ++i) {
        uintptr_t older = 0;
        if (!read_checked(thread + layout.thread_next, older))
            return 0;
        if (older == 0)
            return thread;
        thread = older;
    }
    return 0;
}

// The value of the small int that local variable `index` of `frame` holds; none where it holds something
// else.
std::optional<int64_t> small_int_local(const PythonRuntime& python, uintptr_t frame, int64_t index) {
    const PythonLayout& layout = python.layout;
    uintptr_t object = 0;
    if (!read_checked(frame + layout.frame_locals + static_cast<uintptr_t>(index) * sizeof(uintptr_t),
                      object))
        return std::nullopt;
    if (layout.frame_code_tagged)
        object &= ~uintptr_t{3};
    uintptr_t type = 0;
    int64_t size = 0;
    if (object == 0 || !read_checked(object + layout.object_type, type) || type != python.long_type ||
        !read_checked(object + layout.long_size, size))
        return std::nullopt;
    int64_t count = size;
    if (layout.long_size_tagged) {
        const int64_t sign = size & 3;
        count = sign == 1 ? 0 : sign == 2 ? -1 : size >> 3;
    }
    // Two 30-bit digits hold any id; a negative count is a negative number.
    uint32_t digits[2] = {};
    if (count < 0 || count > 2 ||
        !copy_checked(digits, object + layout.long_digits, static_cast<size_t>(count) * sizeof(uint32_t)))
        return std::nullopt;
    int64_t value = 0;
    for (int64_t i = count - 1; i >= 0; --i)
        value = value << 30 | (digits[i] & 0x3fffffff);
    return value;
}

// Which of a code object's locals is named `name`, from the tuple of its names.
std::optional<int64_t> local_index(const PythonRuntime& python, uintptr_t names, std::string_view name) {
    const PythonLayout& layout = python.layout;
    uintptr_t type = 0;
    int64_t count = 0;
    if (names == 0 || !read_checked(names + layout.object_type, type) || type != python.tuple_type ||
        !read_checked(names + layout.tuple_size, count))
        return std::nullopt;
    for (int64_t i = 0; i < std::min(count, kMaxLocals); ++i) {
        uintptr_t item = 0;
        if (!read_checked(names + layout.tuple_items + static_cast<uintptr_t>(i) * sizeof(uintptr_t), item))
            return std::nullopt;
        if (other_threads_text_equals(item, name))
            return i;
    }
    return std::nullopt;
}

void take_target(const PythonRuntime& python, uintptr_t frame, const CodeName& code,
                 PythonProcessTarget& target) {
    std::copy_n(code.filename, code.description.filename_size, target.filename);
    std::copy_n(code.qualname, code.description.qualname_size, target.qualname);
    target.filename_size = code.description.filename_size;
    target.qualname_size = code.description.qualname_size;
    target.first_line = code.description.identity.first_line;
    target.dataloader_worker_id.reset();
    if (!dataloader_worker_loop(code))
        return;
    if (const std::optional<int64_t> index = local_index(python, code.local_names, "worker_id"))
        target.dataloader_worker_id = small_int_local(python, frame, *index);
}

} // namespace

bool find_python_process_target(PythonProcessTarget& target) {
    const PythonRuntime* python = python_runtime(true);
    if (python == nullptr || !python_initialized() || python_finalizing())
        return false;
    const PythonLayout& layout = python->layout;
    const uintptr_t thread = first_thread_state(*python);
    if (thread == 0)
        return false;
    const uintptr_t code_mask = layout.frame_code_tagged ? ~uintptr_t{3} : ~uintptr_t{0};
    // 3.10's code objects have no qualified names.
    const bool qualified = layout.version >= python_version(3, 11);
    const std::string_view bootstrap = qualified ? "BaseProcess._bootstrap" : "_bootstrap";
    // The two Python frames just inside the one being looked at: what _bootstrap calls (run, or a
    // subclass's run that overrides it), and what that calls.
    uintptr_t inner_frames[2] = {};
    uintptr_t inner_codes[2] = {};
    uintptr_t frame = other_threads_innermost_frame(layout, thread);
    for (int steps = 0; steps < kMaxFrames && frame != 0; ++steps) {
        uintptr_t previous = 0;
        uintptr_t code_object = 0;
        uint8_t owner = 0;
        if (frame % alignof(void*) != 0 || !read_checked(frame + layout.frame_previous, previous) ||
            !read_checked(frame + layout.frame_code, code_object) ||
            (layout.frame_has_owner && !read_checked(frame + layout.frame_owner, owner)))
            return false;
        code_object &= code_mask;
        // The interpreter's shims and what is not a code object (3.13+ frames may hold None) are no
        // Python code. A frame's file is read only where its name says it may be the one looked for.
        PythonCodeIdentity identity;
        const bool shim = layout.frame_has_owner && owner >= layout.first_shim_owner;
        if (!shim && read_other_threads_code_identity(code_object, identity)) {
            CodeName code{};
            if (other_threads_text_equals(identity.qualname, bootstrap) && name_code(code_object, code) &&
                code.file().ends_with("multiprocessing/process.py")) {
                CodeName run{};
                if (inner_frames[0] == 0 || !name_code(inner_codes[0], run))
                    return false;
                // BaseProcess.run calls the target; a subclass's own run is what the process runs.
                if (run.name() != (qualified ? "BaseProcess.run" : "run") ||
                    !run.file().ends_with("multiprocessing/process.py")) {
                    take_target(*python, inner_frames[0], run, target);
                    return true;
                }
                CodeName called{};
                if (inner_frames[1] == 0 || !name_code(inner_codes[1], called))
                    return false;
                take_target(*python, inner_frames[1], called, target);
                return true;
            }
            inner_frames[1] = inner_frames[0];
            inner_codes[1] = inner_codes[0];
            inner_frames[0] = frame;
            inner_codes[0] = code_object;
        }
        frame = previous;
    }
    return false;
}

} // namespace gpuleak
