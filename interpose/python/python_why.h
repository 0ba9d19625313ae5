// gpuleak.why() run inside the program at an out-of-memory error and at its exit: the gpuleak Python
// package, called through the interpreter's C API under the GIL, finds what keeps the device memory alive
// and records it in the trace (gpuleak_retainers), before the error reaches the program.
#pragma once

namespace gpuleak {

// Called by a sub-allocator (gpuleak_out_of_memory: the PyTorch adapter's out-of-memory observer) before
// it raises the error, with none of its locks held. In a Python program whose interpreter runs and is not
// finalizing, and unless GPULEAK_PYTHON=0, imports the package (as the program would, else from the
// directory GPULEAK_PYTHON_PACKAGE names, which `gpuleak run` sets) and calls its out-of-memory hook, which
// says whether GPULEAK_WHY asks for it. Whatever Python raises is cleared, and an exception the thread had
// pending is put back. Takes the GIL: the caller must not hold a lock that a thread holding the GIL waits
// for.
void why_at_out_of_memory(int device);

// A notebook's cell `cell` ended with an exception IPython showed (gpuleak_cell_error), called from a
// thread that has run Python (the kernel's, which holds the GIL; it is taken if not): in a running
// interpreter that is not finalizing, the document of the exception shown last (format::
// EventType::ProgramError's, with "cell" in it) goes to `record`. Whatever Python raises is cleared.
void why_cell_error(const char* cell, void (*record)(const char* document));

// Called as the process comes to hold device memory (each allocation of it; only the first call that
// finds a running interpreter acts): in a Python program, asks the interpreter's main thread, through
// Py_AddPendingCall (callable from any thread, with no lock of Python's held), to register a function
// with atexit. Never blocks, never calls into Python itself. At the program's exit that function passes
// the exception the program's code ended with, if any, to `program_error` (format::EventType::
// ProgramError's document), then calls `program_ended`: the program's own code is over, and the atexit
// functions registered before it
// run after it (libraries' clean-ups, such as JAX's, which frees every array), so what they free was
// still held by the program. Then, where `search` asks, it searches for what keeps the device memory
// alive (the package's at_exit hook), importing the package only then.
void why_at_exit_once_holding(void (*program_ended)(), void (*program_error)(const char* document),
                              bool search);

} // namespace gpuleak
