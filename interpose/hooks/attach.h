// gpuleak attach: libgpuleak.so loaded into a running process (by gdb, on gpuleak attach's behalf) and
// told to record it from now on, and later to stop, leaving the process as it found it.
#pragma once

// What gpuleak_attach and gpuleak_detach return; gpuleak attach (launcher/attach_command.cpp) reads it
// from gdb.
enum GpuleakAttachResult {
    GPULEAK_ATTACH_OK = 0,
    GPULEAK_ATTACH_RECORDING = 1,    // gpuleak_attach: the process records already
    GPULEAK_ATTACH_NO_TRACE = 2,     // gpuleak_attach: the trace could not be made (its log says why)
    GPULEAK_ATTACH_NOT_ATTACHED = 3, // gpuleak_detach: no recording that an attach began
};

extern "C" {
// Records the process from now on into a trace named by `output_pattern` (GPULEAK_OUTPUT's form, "%p"
// the pid), gpuleak's warnings appended to the file `log_path` instead of the program's stderr: the
// calls loaded objects bound to CUDA, dlsym, fork, pthread_create, exec and _exit come to libgpuleak
// from now on, and PyTorch's allocator, where loaded, reports its blocks.
__attribute__((visibility("default"))) int gpuleak_attach(const char* output_pattern, const char* log_path);
// Ends that recording: every call goes where it went before the attach, the trace ends as detached.
__attribute__((visibility("default"))) int gpuleak_detach();
}

namespace gpuleak {

// Whether libgpuleak.so was loaded as the program started (LD_PRELOAD: it is in the program's global
// scope), rather than into a running process by gpuleak attach, which records only when asked to.
bool loaded_at_start();

} // namespace gpuleak
