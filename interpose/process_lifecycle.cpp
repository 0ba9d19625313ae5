// Exported hooks that follow the process rather than CUDA: fork and _Fork (the parent's trace lists its
// children) and _exit/_Exit (which skip exit handlers, yet the exit status belongs in the trace).
#include <dlfcn.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <unistd.h>

#include "recorder.h"

namespace {

template <typename Function> Function next_definition(const char* name) {
    // Our exported dlsym keeps RTLD_NEXT relative to its caller, which here is libgpuleak itself.
    return reinterpret_cast<Function>(dlsym(RTLD_NEXT, name));
}

[[noreturn]] void end_process(const char* name, int status) {
    gpuleak::record_process_exit(status);
    using ExitFunction = void (*)(int);
    if (auto next = next_definition<ExitFunction>(name))
        next(status);
    ::syscall(SYS_exit_group, status);
    __builtin_unreachable();
}

using ForkFunction = pid_t (*)();

// Forks with the next definition of `name` and records the child in the parent's trace. Where the fork
// does not run the pthread_atfork handlers, the child lets go of its parent's trace here instead.
pid_t fork_through(const char* name, ForkFunction& next, bool runs_atfork_handlers) {
    if (next == nullptr)
        next = next_definition<ForkFunction>(name);
    pid_t child = next != nullptr ? next() : static_cast<pid_t>(::syscall(SYS_fork));
    if (child == 0 && (!runs_atfork_handlers || next == nullptr))
        gpuleak::start_over_after_fork();
    else if (child > 0)
        gpuleak::record_fork(child);
    return child;
}

} // namespace

extern "C" {

__attribute__((visibility("default"))) pid_t fork() {
    static ForkFunction next = nullptr;
    return fork_through("fork", next, true);
}

// _Fork (glibc 2.34) skips the pthread_atfork handlers, the recorder's among them.
__attribute__((visibility("default"))) pid_t _Fork() {
    static ForkFunction next = nullptr;
    return fork_through("_Fork", next, false);
}

__attribute__((visibility("default"), noreturn)) void _exit(int status) {
    end_process("_exit", status);
}

__attribute__((visibility("default"), noreturn)) void _Exit(int status) {
    end_process("_Exit", status);
}

} // extern "C"
