// Exported hooks that follow the process rather than CUDA: fork (the parent's trace lists its
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

} // namespace

extern "C" {

__attribute__((visibility("default"))) pid_t fork() {
    using ForkFunction = pid_t (*)();
    static ForkFunction next = nullptr;
    if (next == nullptr)
        next = next_definition<ForkFunction>("fork");
    if (next == nullptr)
        return static_cast<pid_t>(::syscall(SYS_fork));
    pid_t child = next();
    if (child > 0)
        gpuleak::record_fork(child);
    return child;
}

__attribute__((visibility("default"), noreturn)) void _exit(int status) {
    end_process("_exit", status);
}

__attribute__((visibility("default"), noreturn)) void _Exit(int status) {
    end_process("_Exit", status);
}

} // extern "C"
