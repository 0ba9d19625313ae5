#include "python_frames.h"

#include <algorithm>
#include <cstdint>

#include "memory_read.h"
#include "python_runtime.h"

namespace gpuleak {

namespace {

uint32_t instruction_offset(const PythonLayout& layout, uintptr_t frame, uintptr_t code) {
    if (layout.instruction_kind == PythonInstructionKind::last_index) {
        const auto last_index = read_at<int32_t>(frame + layout.frame_instruction);
        return last_index < 0 ? kPythonOffsetBeforeFirstInstruction : static_cast<uint32_t>(last_index) * 2;
    }
    const auto instruction = read_at<uintptr_t>(frame + layout.frame_instruction);
    const uintptr_t bytecode = code + layout.code_bytecode;
    if (instruction < bytecode)
        return kPythonOffsetBeforeFirstInstruction;
    return static_cast<uint32_t>(
        std::min<uintptr_t>(instruction - bytecode, kPythonOffsetBeforeFirstInstruction - 1));
}

} // namespace

size_t capture_python_frames(PythonFrame* out, size_t max) {
    const PythonRuntime* python = python_runtime();
    if (python == nullptr || max == 0)
        return 0;
    const auto thread_state = reinterpret_cast<uintptr_t>(python->this_thread_state());
    if (thread_state == 0)
        return 0;
    const PythonLayout& layout = python->layout;
    // Finalization frees the thread states and frames of all threads but the finalizing one (daemon
    // threads blocked in C calls keep pointing at theirs).
    const uintptr_t finalizing_at = python->runtime + layout.runtime_finalizing;
    const auto finalized_by_another = [&] {
        const uintptr_t finalizing = acquire_word_at(finalizing_at);
        return finalizing != 0 && finalizing != thread_state;
    };
    if (finalized_by_another())
        return 0;

    uintptr_t frame = read_at<uintptr_t>(thread_state + layout.thread_frame);
    if (layout.frame_link == PythonFrameLink::through_cframe && frame != 0)
        frame = read_at<uintptr_t>(frame + layout.cframe_current_frame);
    size_t count = 0;
    // Entry frames come at most a couple between two Python frames; a longer walk is a broken chain.
    for (size_t steps = 4 * max + 8; frame != 0 && count < max && steps > 0;
         --steps, frame = read_at<uintptr_t>(frame + layout.frame_previous)) {
        if (frame % alignof(void*) != 0)
            break;
        if (layout.frame_has_owner && read_at<uint8_t>(frame + layout.frame_owner) >= layout.first_shim_owner)
            continue;
        auto code = read_at<uintptr_t>(frame + layout.frame_code);
        if (layout.frame_code_tagged)
            code &= ~uintptr_t{3};
        // What is not a code object (3.13+ frames may hold None) is no Python code to report.
        if (code == 0 || code % alignof(void*) != 0 ||
            read_at<uintptr_t>(code + layout.object_type) != python->code_type)
            continue;
        out[count++] = PythonFrame{code, instruction_offset(layout, frame, code)};
    }
    // Finalization that began during the walk may have freed what it read. It leaves a window between
    // the two checks in which a daemon thread's walk reads freed memory, as faulthandler's does.
    return finalized_by_another() ? 0 : count;
}

} // namespace gpuleak
