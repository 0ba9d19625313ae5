// Exported hooks that follow the process rather than CUDA: fork and _Fork (the parent's trace lists its
// children, each child is recorded from its start), pthread_create (a thread knows the stack that started
// it), _exit/_Exit (which skip exit handlers, yet the exit
// status belongs in the trace) and the exec family (the image ends there: without a record the trace would
// read as killed).
#include <alloca.h>
#include <cerrno>
#include <cstdarg>
#include <cstdlib>
#include <dlfcn.h>
#include <pthread.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <unistd.h>

#include "hooks/attach.h"
#include "recording/monotonic_clock.h"
#include "recording/recorder.h"

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
    // Taken before the child exists: its trace starts after its parent's record of the fork.
    const uint64_t forked_ns = gpuleak::monotonic_ns();
    pid_t child = next != nullptr ? next() : static_cast<pid_t>(::syscall(SYS_fork));
    if (child == 0 && (!runs_atfork_handlers || next == nullptr))
        gpuleak::start_over_after_fork(false);
    else if (child > 0)
        gpuleak::record_fork(child, forked_ns);
    return child;
}

using ExecveFunction = int (*)(const char*, char* const[], char* const[]);
using ExecvFunction = int (*)(const char*, char* const[]);
using FexecveFunction = int (*)(int, char* const[], char* const[]);

// Marks the trace as ended by exec, runs the exec, and withdraws the mark when the exec returns: it
// failed and the image goes on.
template <typename Function, typename... Arguments>
int exec_through(const char* name, Function& next, Arguments... arguments) {
    if (next == nullptr)
        next = next_definition<Function>(name);
    if (next == nullptr) {
        errno = ENOSYS;
        return -1;
    }
    gpuleak::record_exec();
    int result = next(arguments...);
    gpuleak::record_exec_failed();
    return result;
}

using ThreadRoutine = void* (*)(void*);
using PthreadCreateFunction = int (*)(pthread_t*, const pthread_attr_t*, ThreadRoutine, void*);

struct ThreadLaunch {
    ThreadRoutine routine;
    void* argument;
    gpuleak::ThreadStart* start;
};

void end_started_thread(void* /*unused*/) {
    gpuleak::end_started_thread();
}

void* run_started_thread(void* launch_address) {
    const ThreadLaunch launch = *static_cast<ThreadLaunch*>(launch_address);
    std::free(launch_address);
    gpuleak::begin_started_thread(launch.start);
    void* result = nullptr;
    // Also where the thread calls pthread_exit or is cancelled (this file has no exceptions, so no
    // destructor would run then).
    pthread_cleanup_push(end_started_thread, nullptr);
    result = launch.routine(launch.argument);
    pthread_cleanup_pop(1);
    return result;
}

// Before main: a Python program's host memory is recorded from its start, not from its first CUDA call.
// Loaded into a running process by gpuleak attach, nothing is recorded until it asks.
__attribute__((constructor)) void record_python_from_start() {
    if (gpuleak::loaded_at_start())
        gpuleak::start_recording_if_python();
}

} // namespace

// The execl family takes its arguments as a list ending in NULL; they are gathered on the stack (the
// caller may be a vfork child, where the heap is not ours to use) into the argv of its execv twin. A
// macro, not a function: va_start and alloca must run in the variadic function's own frame.
// `arguments` names the array it declares, so it cannot be parenthesised.
// NOLINTBEGIN(bugprone-macro-parentheses)
#define GPULEAK_GATHER_ARGUMENTS(first, arguments, after_null)                                               \
    va_list count_list;                                                                                      \
    va_start(count_list, first);                                                                             \
    size_t count = 1;                                                                                        \
    while (va_arg(count_list, char*) != nullptr)                                                             \
        ++count;                                                                                             \
    va_end(count_list);                                                                                      \
    auto** arguments = static_cast<char**>(alloca((count + 1) * sizeof(char*)));                             \
    va_list list;                                                                                            \
    va_start(list, first);                                                                                   \
    arguments[0] = const_cast<char*>(first);                                                                 \
    for (size_t i = 1; i < count; ++i)                                                                       \
        arguments[i] = va_arg(list, char*);                                                                  \
    static_cast<void>(va_arg(list, char*));                                                                  \
    arguments[count] = nullptr;                                                                              \
    after_null;                                                                                              \
    va_end(list)
// NOLINTEND(bugprone-macro-parentheses)

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

__attribute__((visibility("default"))) int pthread_create(pthread_t* thread, const pthread_attr_t* attributes,
                                                          ThreadRoutine routine, void* argument) {
    static PthreadCreateFunction next = nullptr;
    if (next == nullptr)
        next = next_definition<PthreadCreateFunction>("pthread_create");
    if (next == nullptr)
        return EAGAIN;
    gpuleak::ThreadStart* start = gpuleak::capture_thread_start();
    if (start == nullptr)
        return next(thread, attributes, routine, argument);
    auto* launch = static_cast<ThreadLaunch*>(std::malloc(sizeof(ThreadLaunch)));
    if (launch == nullptr) {
        gpuleak::forget_thread_start(start);
        return next(thread, attributes, routine, argument);
    }
    *launch = {routine, argument, start};
    const int result = next(thread, attributes, run_started_thread, launch);
    if (result != 0) {
        std::free(launch);
        gpuleak::forget_thread_start(start);
    }
    return result;
}

__attribute__((visibility("default"), noreturn)) void _exit(int status) {
    end_process("_exit", status);
}

__attribute__((visibility("default"), noreturn)) void _Exit(int status) {
    end_process("_Exit", status);
}

__attribute__((visibility("default"))) int execve(const char* path, char* const argv[], char* const envp[]) {
    static ExecveFunction next = nullptr;
    return exec_through("execve", next, path, argv, envp);
}

__attribute__((visibility("default"))) int execv(const char* path, char* const argv[]) {
    static ExecvFunction next = nullptr;
    return exec_through("execv", next, path, argv);
}

__attribute__((visibility("default"))) int execvp(const char* file, char* const argv[]) {
    static ExecvFunction next = nullptr;
    return exec_through("execvp", next, file, argv);
}

__attribute__((visibility("default"))) int execvpe(const char* file, char* const argv[], char* const envp[]) {
    static ExecveFunction next = nullptr;
    return exec_through("execvpe", next, file, argv, envp);
}

__attribute__((visibility("default"))) int fexecve(int fd, char* const argv[], char* const envp[]) {
    static FexecveFunction next = nullptr;
    return exec_through("fexecve", next, fd, argv, envp);
}

__attribute__((visibility("default"))) int execl(const char* path, const char* arg, ...) {
    GPULEAK_GATHER_ARGUMENTS(arg, arguments, (void)0);
    return execv(path, arguments);
}

__attribute__((visibility("default"))) int execlp(const char* file, const char* arg, ...) {
    GPULEAK_GATHER_ARGUMENTS(arg, arguments, (void)0);
    return execvp(file, arguments);
}

__attribute__((visibility("default"))) int execle(const char* path, const char* arg, ...) {
    char* const* environment = nullptr;
    GPULEAK_GATHER_ARGUMENTS(arg, arguments, environment = va_arg(list, char* const*));
    return execve(path, arguments, environment);
}

} // extern "C"
