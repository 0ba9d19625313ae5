// Native stack capture, behind a small interface so that the unwinder can be swapped.
#pragma once

#include <cstdint>

namespace gpuleak {

// Remembers the address range of the object holding the recorder, so that its own frames are left
// out of captured stacks. When the recorder is linked into the main program (unit tests) nothing is
// left out: there the program's frames and the recorder's share one object.
void init_native_unwind();

struct NativeStack {
    const uint64_t* frames; // valid until the thread's next capture
    uint32_t count;
    uint64_t repeat_serial; // not 0: the same frames as every other capture of the thread with this serial
};

// Up to `max_frames` return addresses of the calling thread, innermost first, without the recorder's
// own frames: in `buffer`, or, for a stack the thread captured before from the same place, in the
// thread's repeated-stack cache.
NativeStack capture_native_stack(uint64_t* buffer, uint32_t max_frames);

} // namespace gpuleak
