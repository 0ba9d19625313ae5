// Native stack capture, behind a small interface so that the unwinder can be swapped.
#pragma once

#include <cstdint>

namespace gpuleak {

// Remembers the address range of the object holding the recorder, so that its own frames are left
// out of captured stacks. When the recorder is linked into the main program (unit tests) nothing is
// left out: there the program's frames and the recorder's share one object.
void init_native_unwind();

// Fills `frames` with up to `max_frames` return addresses of the calling thread, innermost first,
// without the recorder's own frames. Returns the count.
uint32_t capture_native_stack(uint64_t* frames, uint32_t max_frames);

} // namespace gpuleak
