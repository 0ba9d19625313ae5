#include "python/python_frames.h"

#include <algorithm>
#include <cstdint>

#include "python/memory_read.h"
#include "python/python_runtime.h"

namespace gpuleak {

namespace {

// The fields of the layout that the walk reads at every frame, copied out of it once: the walk's stores
// to its output could otherwise alias them, and the compiler would load them again after each.
struct FrameWalkLayout {
    explicit FrameWalkLayout(const PythonLayout& layout, uintptr_t code_type)
        : frame_previous(layout.frame_previous), frame_code(layout.frame_code),
          frame_instruction(layout.frame_instruction), frame_owner(layout.frame_owner),
          frame_is_entry(layout.frame_is_entry), code_bytecode(layout.code_bytecode),
          object_type(layout.object_type),
          code_mask(layout.frame_code_tagged ? ~uintptr_t{3} : ~uintptr_t{0}), code_type(code_type),
          first_shim_owner(layout.frame_has_owner ? layout.first_shim_owner : uint32_t{0x100}) {}

    uint32_t frame_previous;
    uint32_t frame_code;
    uint32_t frame_instruction;
    uint32_t frame_owner;
    uint32_t frame_is_entry;
    uint32_t code_bytecode;
    uint32_t object_type;
    uintptr_t code_mask; // clears the tag bits of a tagged code reference
    uintptr_t code_type;
    uint32_t first_shim_owner; // above any owner where frames have none
};

// The trace keeps 31 bits of offset: the top bit of its word is a flag.
constexpr uint64_t kLastOffset = kPythonOffsetBeforeFirstInstruction - 1;

// How a walk reads: the calling thread's own frames with plain loads (they cannot change while it is in
// a hook), another thread's through the kernel (that thread may run on and free them), where a failed
// read ends the walk.
struct PlainReads {
    template <class T> static bool read(uintptr_t address, T& value) {
        value = read_at<T>(address);
        return true;
    }
};
struct CheckedReads {
    template <class T> static bool read(uintptr_t address, T& value) { return read_checked(address, value); }
};

// The walk of one layout family: what differs between CPython versions at every frame is decided when
// the template is instantiated, not at each frame.
// Not inlined into the recorder's capture: on its own it keeps the layout in registers.
template <class Reads, PythonInstructionKind kInstruction, PythonLoopEntryKind kLoopEntry>
__attribute__((noinline)) size_t walk_frames(const FrameWalkLayout& walk, uintptr_t frame, PythonFrame* out,
                                             size_t max) {
    constexpr bool kAboveShim = kLoopEntry == PythonLoopEntryKind::above_shim;
    size_t count = 0;
    bool chain_ended = false;
    uintptr_t checked_code = 0; // the code object whose type the walk checked last
    // Shims come at most a couple between two Python frames; a longer walk is a broken chain.
    for (size_t steps = 4 * max + 8; steps > 0; --steps) {
        if (frame == 0) {
            chain_ended = true;
            break;
        }
        uint8_t owner = 0;
        uintptr_t previous = 0;
        if (frame % alignof(void*) != 0 || !Reads::read(frame + walk.frame_owner, owner) ||
            !Reads::read(frame + walk.frame_previous, previous))
            break;
        const uintptr_t this_frame = frame;
        frame = previous;
        if (owner >= walk.first_shim_owner) {
            // Each evaluation loop pushes a shim below the first frame it runs.
            if (count > 0)
                out[count - 1].loop_entry = true;
            if (count == max)
                break;
            continue;
        }
        // A full `out` walks on only until it is known whether its outermost frame is a loop entry.
        if (count == max && !kAboveShim)
            break;
        uintptr_t code = 0;
        if (!Reads::read(this_frame + walk.frame_code, code))
            break;
        code &= walk.code_mask;
        // What is not a code object (3.13+ frames may hold None) is no Python code to report. Recursion
        // runs one code object in frame after frame: its type is read once.
        if (code != checked_code) {
            uintptr_t type = 0;
            if (code == 0 || code % alignof(void*) != 0 || !Reads::read(code + walk.object_type, type) ||
                type != walk.code_type)
                continue;
            checked_code = code;
        }
        if (count == max)
            break;
        uint32_t offset = kPythonOffsetBeforeFirstInstruction;
        if constexpr (kInstruction == PythonInstructionKind::last_index) {
            int32_t last_index = -1;
            if (!Reads::read(this_frame + walk.frame_instruction, last_index))
                break;
            if (last_index >= 0)
                offset = static_cast<uint32_t>(
                    std::min(uint64_t{2} * static_cast<uint32_t>(last_index), kLastOffset));
        } else {
            uintptr_t instruction = 0;
            if (!Reads::read(this_frame + walk.frame_instruction, instruction))
                break;
            const uintptr_t bytecode = code + walk.code_bytecode;
            if (instruction >= bytecode)
                offset = static_cast<uint32_t>(std::min<uint64_t>(instruction - bytecode, kLastOffset));
        }
        bool loop_entry = false;
        if constexpr (kLoopEntry == PythonLoopEntryKind::every_frame) {
            loop_entry = true;
        } else if constexpr (kLoopEntry == PythonLoopEntryKind::is_entry) {
            uint8_t is_entry = 0;
            if (!Reads::read(this_frame + walk.frame_is_entry, is_entry))
                break;
            loop_entry = is_entry != 0;
        }
        out[count++] = PythonFrame{code, offset, loop_entry};
    }
    // Whatever ran the outermost frame of the chain started a loop for it.
    if (chain_ended && kAboveShim && count > 0)
        out[count - 1].loop_entry = true;
    return count;
}

template <class Reads>
size_t walk_frames(const PythonLayout& layout, const FrameWalkLayout& walk, uintptr_t frame, PythonFrame* out,
                   size_t max) {
    using Instruction = PythonInstructionKind;
    using LoopEntry = PythonLoopEntryKind;
    if (layout.instruction_kind == Instruction::last_index)
        return walk_frames<Reads, Instruction::last_index, LoopEntry::every_frame>(walk, frame, out, max);
    if (layout.loop_entry_kind == LoopEntry::is_entry)
        return walk_frames<Reads, Instruction::code_unit_ptr, LoopEntry::is_entry>(walk, frame, out, max);
    return walk_frames<Reads, Instruction::code_unit_ptr, LoopEntry::above_shim>(walk, frame, out, max);
}

// The thread state that finalizes the interpreter; 0 before finalization.
uintptr_t finalizing_thread_state(const PythonRuntime& python) {
    return acquire_word_at(python.runtime + python.layout.runtime_finalizing);
}

} // namespace

uintptr_t other_threads_innermost_frame(const PythonLayout& layout, uintptr_t thread_state) {
    uintptr_t frame = 0;
    if (!read_checked(thread_state + layout.thread_frame, frame))
        return 0;
    if (layout.frame_link == PythonFrameLink::through_cframe &&
        (frame == 0 || !read_checked(frame + layout.cframe_current_frame, frame)))
        return 0;
    return frame;
}

uintptr_t main_interpreter(const PythonLayout& layout, uintptr_t runtime) {
    uintptr_t interpreter = 0;
    return read_checked(runtime + layout.runtime_interpreters, interpreter) ? interpreter : 0;
}

size_t capture_waiting_python_frames(PythonFrame* out, size_t max) {
    const PythonRuntime* python = python_runtime(true);
    if (python == nullptr || max == 0 || python->this_thread_state() != nullptr ||
        finalizing_thread_state(*python) != 0)
        return 0;
    const PythonLayout& layout = python->layout;
    const uintptr_t interpreter = main_interpreter(layout, python->runtime);
    uintptr_t thread_state = 0;
    uintptr_t older = 0;
    // One thread state, and no other: with two Python threads, which one waits is not known.
    if (interpreter == 0 || !read_checked(interpreter + layout.interpreter_threads, thread_state) ||
        thread_state == 0 || !read_checked(thread_state + layout.thread_next, older) || older != 0)
        return 0;
    const uintptr_t frame = other_threads_innermost_frame(layout, thread_state);
    return frame == 0 ? 0
                      : walk_frames<CheckedReads>(layout, FrameWalkLayout(layout, python->code_type), frame,
                                                  out, max);
}

bool python_finalizing() {
    const PythonRuntime* python = python_runtime(true);
    return python != nullptr && finalizing_thread_state(*python) != 0;
}

uint64_t python_module_count() {
    const PythonRuntime* python = python_runtime(true);
    if (python == nullptr || finalizing_thread_state(*python) != 0)
        return 0;
    const PythonLayout& layout = python->layout;
    const uintptr_t interpreter = main_interpreter(layout, python->runtime);
    uintptr_t modules = 0;
    int64_t used = 0;
    if (interpreter == 0 || !read_checked(interpreter + layout.interpreter_modules, modules) ||
        modules == 0 || !read_checked(modules + layout.dict_used, used) || used < 0)
        return 0;
    return static_cast<uint64_t>(used);
}

size_t capture_python_frames(PythonFrame* out, size_t max, bool& finalizing) {
    const PythonRuntime* python = python_runtime();
    if (python == nullptr || max == 0)
        return 0;
    const auto thread_state = reinterpret_cast<uintptr_t>(python->this_thread_state());
    if (thread_state == 0)
        return 0;
    const PythonLayout& layout = python->layout;
    // Finalization frees the thread states and frames of all threads but the finalizing one (daemon
    // threads blocked in C calls keep pointing at theirs).
    const auto finalized_by_another = [&] {
        const uintptr_t finalizer = finalizing_thread_state(*python);
        finalizing |= finalizer != 0;
        return finalizer != 0 && finalizer != thread_state;
    };
    if (finalized_by_another())
        return 0;

    uintptr_t frame = read_at<uintptr_t>(thread_state + layout.thread_frame);
    if (layout.frame_link == PythonFrameLink::through_cframe && frame != 0)
        frame = read_at<uintptr_t>(frame + layout.cframe_current_frame);
    const size_t count =
        walk_frames<PlainReads>(layout, FrameWalkLayout(layout, python->code_type), frame, out, max);
    // Finalization that began during the walk may have freed what it read. It leaves a window between
    // the two checks in which a daemon thread's walk reads freed memory, as faulthandler's does.
    return finalized_by_another() ? 0 : count;
}

} // namespace gpuleak
