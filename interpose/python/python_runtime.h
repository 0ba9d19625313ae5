// The CPython interpreter running in this process, if any, found at run time without linking against
// libpython: its version, the layout of its structs and the few of its symbols that reading its frames
// needs.
#pragma once

#include <cstdint>

#include "python/python_layout.h"

namespace gpuleak {

struct PythonRuntime {
    PythonLayout layout;
    uintptr_t runtime = 0;      // &_PyRuntime
    uintptr_t code_type = 0;    // &PyCode_Type
    uintptr_t unicode_type = 0; // &PyUnicode_Type
    uintptr_t bytes_type = 0;   // &PyBytes_Type
    uintptr_t tuple_type = 0;   // &PyTuple_Type
    uintptr_t long_type = 0;    // &PyLong_Type
    // PyGILState_GetThisThreadState: a thread-local read, valid without the GIL; the thread state of the
    // calling thread whether or not it holds the GIL, null in threads that never ran Python and before
    // the interpreter starts or after it ended.
    void* (*this_thread_state)() = nullptr;
};

// The interpreter whose frames can be read, looked for on the first call from any thread; nullptr in a
// process without Python, and with one warning on stderr for a Python that is there but not supported
// (a version other than 3.10-3.14, a debug or free-threaded build), given by the first call that does not
// pass `quiet` (recording GPU memory needs the frames; sampling host memory only asks). Never blocks: a
// call made while another thread is still looking also answers nullptr (waiting could deadlock on the
// loader's lock, which the looking takes). A Python loaded after the first call (dlopen of libpython by
// an embedding program) is not seen.
const PythonRuntime* python_runtime(bool quiet = false);

// Whether the interpreter has initialized (Py_IsInitialized, a read of one flag): its signal handlers are
// in place from then on. False without Python.
bool python_initialized();

// Whether a CPython is in the process (supported or not): a Python program, or one that embeds it.
bool python_program();

} // namespace gpuleak
