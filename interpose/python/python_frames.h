// The calling thread's Python stack, read from inside an allocation hook without the GIL.
//
// The calling thread is inside a C call, so its own frame chain cannot change while the walk runs and
// every frame and code object on it stays alive: the walk is plain memory reads (no GIL, no Python
// object allocated, no reference count touched, nothing that can run Python code), as CPython's
// faulthandler does. Cost: a thread-local read, then a few loads a frame.
#pragma once

#include <cstddef>
#include <cstdint>

#include "python/python_frame.h"
#include "python/python_layout.h"

namespace gpuleak {

// Fills `out` with up to `max` frames of the calling thread's Python stack, innermost first: with a
// deeper stack the innermost `max` are kept. The interpreter's own shim frames are left out, so the
// frames are those of traceback.extract_stack() at the same point, in reverse. Each frame says whether
// it is a loop entry, the first frame its run of the evaluation loop ran: on 3.10 every frame; on 3.11
// the frames whose is_entry is set; on 3.12+ the frame right above a shim (each run pushes one below
// its first frame) and the outermost frame of the chain, so with a deeper stack the walk reads on past
// the `max`-th frame to the next one to tell. Returns the count: 0 without a (supported) Python in the
// process, in threads that never ran Python, before the interpreter starts and after it ends, and in
// threads other than the finalizing one while the interpreter finalizes. `finalizing` is set when the
// walk saw the interpreter finalizing (a read the walk makes anyway), left alone otherwise.
size_t capture_python_frames(PythonFrame* out, size_t max, bool& finalizing);

// The Python stack of the program's one Python thread, for a thread that never ran Python (a framework's
// worker: TensorFlow's executors, XLA's) making memory while the program waits on it: the program's line
// that asked for the work. Filled as capture_python_frames fills it, but read through the kernel
// (copy_checked), as that thread may run on meanwhile and free what is read. 0 in a thread that has run
// Python, where the interpreter has more than one thread (which of them waits is not known), while it
// finalizes, and where a read failed. A few system calls a frame.
size_t capture_waiting_python_frames(PythonFrame* out, size_t max);

// The main interpreter's state in the `_PyRuntime` at `runtime`, read through the kernel; 0 where none was
// read.
uintptr_t main_interpreter(const PythonLayout& layout, uintptr_t runtime);

// The innermost frame of another thread's `thread_state`, read through the kernel; 0 where none was read.
uintptr_t other_threads_innermost_frame(const PythonLayout& layout, uintptr_t thread_state);

// Whether the interpreter has begun finalizing: Py_FinalizeEx sets it after the atexit handlers, before
// it tears the modules down. One load; false without a (supported) Python in the process. Asks quietly
// (python_runtime's `quiet`): a process only sampled for host memory says nothing of its Python.
bool python_finalizing();

// How many modules the interpreter has imported (sys.modules' size), read from another thread without
// the GIL: where a program's imports end and its work begins. 0 when unknown: without a (supported)
// Python, before sys.modules exists and once the interpreter finalizes. The reads are checked, not
// plain loads, since the dict may be freed meanwhile. Asks quietly, as python_finalizing.
uint64_t python_module_count();

} // namespace gpuleak
