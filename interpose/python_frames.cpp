#include "python_frames.h"

#include <algorithm>
#include <cstdint>

#include "memory_read.h"
#include "python_runtime.h"

namespace gpuleak {

namespace {

uint32_t instruction_offset(const PythonLayout& layout, uintptr_t frame, uintptr_t code) {
    // The trace keeps 31 bits of offset: the top bit of its word is a flag.
    constexpr uint64_t kLastOffset = kPythonOffsetBeforeFirstInstruction - 1;
    if (layout.instruction_kind == PythonInstructionKind::last_index) {
        const auto last_index = read_at<int32_t>(frame + layout.frame_instruction);
        if (last_index < 0)
            return kPythonOffsetBeforeFirstInstruction;
        return static_cast<uint32_t>(std::min(uint64_t{2} * static_cast<uint32_t>(last_index), kLastOffset));
    }
    const auto instruction = read_at<uintptr_t>(frame + layout.frame_instruction);
    const uintptr_t bytecode = code + layout.code_bytecode;
    if (instruction < bytecode)
        return kPythonOffsetBeforeFirstInstruction;
    return static_cast<uint32_t>(std::min<uint64_t>(instruction - bytecode, kLastOffset));
}

// Whether the frame is a loop entry, where the frame itself tells; above_shim layouts learn it from the
// frame the walk visits next.
bool loop_entry(const PythonLayout& layout, uintptr_t frame) {
    switch (layout.loop_entry_kind) {
    case PythonLoopEntryKind::every_frame:
        return true;
    case PythonLoopEntryKind::is_entry:
        return read_at<uint8_t>(frame + layout.frame_is_entry) != 0;
    case PythonLoopEntryKind::above_shim:
        break;
    }
    return false;
}

// The thread state that finalizes the interpreter; 0 before finalization.
uintptr_t finalizing_thread_state(const PythonRuntime& python) {
    return acquire_word_at(python.runtime + python.layout.runtime_finalizing);
}

} // namespace

bool python_finalizing() {
    const PythonRuntime* python = python_runtime();
    return python != nullptr && finalizing_thread_state(*python) != 0;
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
    const bool above_shim = layout.loop_entry_kind == PythonLoopEntryKind::above_shim;
    size_t count = 0;
    bool chain_ended = false;
    // Shims come at most a couple between two Python frames; a longer walk is a broken chain.
    for (size_t steps = 4 * max + 8; steps > 0;
         --steps, frame = read_at<uintptr_t>(frame + layout.frame_previous)) {
        if (frame == 0) {
            chain_ended = true;
            break;
        }
        if (frame % alignof(void*) != 0)
            break;
        if (layout.frame_has_owner &&
            read_at<uint8_t>(frame + layout.frame_owner) >= layout.first_shim_owner) {
            // Each evaluation loop pushes a shim below the first frame it runs.
            if (count > 0)
                out[count - 1].loop_entry = true;
            if (count == max)
                break;
            continue;
        }
        // A full `out` walks on only until it is known whether its outermost frame is a loop entry.
        if (count == max && !above_shim)
            break;
        auto code = read_at<uintptr_t>(frame + layout.frame_code);
        if (layout.frame_code_tagged)
            code &= ~uintptr_t{3};
        // What is not a code object (3.13+ frames may hold None) is no Python code to report.
        if (code == 0 || code % alignof(void*) != 0 ||
            read_at<uintptr_t>(code + layout.object_type) != python->code_type)
            continue;
        if (count == max)
            break;
        out[count++] = PythonFrame{code, instruction_offset(layout, frame, code), loop_entry(layout, frame)};
    }
    // Whatever ran the outermost frame of the chain started a loop for it.
    if (chain_ended && above_shim && count > 0)
        out[count - 1].loop_entry = true;
    // Finalization that began during the walk may have freed what it read. It leaves a window between
    // the two checks in which a daemon thread's walk reads freed memory, as faulthandler's does.
    return finalized_by_another() ? 0 : count;
}

} // namespace gpuleak
