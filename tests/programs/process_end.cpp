// process_end <log> <mode>: allocates, then ends the process the way <mode> says:
//   return0, return3       frees and returns that status from main
//   _exit5                 calls _exit(5) with the allocation still live
//   raise_segv             raises SIGSEGV with the allocation still live
//   own_sigterm_handler    installs a SIGTERM handler and ignores SIGPIPE before touching CUDA, raises
//                          both, logs whether its handler is still installed, frees, returns 0
//   mark                   records a marker through the optional C API between allocation and free
// Calls are logged as in api_families; the program runs the same with and without gpuleak.
#include <csignal>
#include <cstdio>
#include <cstring>
#include <string_view>
#include <unistd.h>

#include "allocation_log.h"
#include "cuda_declarations.h"
#include "gpuleak/gpuleak.h"

namespace {

constexpr size_t kSize = (3 << 20) + 4096;

const AllocationLog* g_log = nullptr;

// Raised synchronously from main, so the log's stdio formatting cannot interrupt itself.
void on_sigterm(int signal_number) {
    g_log->line("call on_sigterm signal=%d", signal_number);
}

// Not inlined: the stack depth tests need a few frames of the program's own above main.
__attribute__((noinline)) void* allocate(const AllocationLog& log) {
    void* pointer = nullptr;
    const int rc = cudaMalloc(&pointer, kSize);
    log.line("alloc cudaMalloc rc=%d address=%#llx size=%zu requested=%zu stream=0x0", rc,
             AllocationLog::address(pointer), kSize, kSize);
    return pointer;
}

__attribute__((noinline)) void release(const AllocationLog& log, void* pointer) {
    const int rc = cudaFree(pointer);
    log.line("free cudaFree rc=%d address=%#llx size=0 stream=0x0", rc, AllocationLog::address(pointer));
}

int keep_own_handlers(const AllocationLog& log) {
    struct sigaction handler {};
    handler.sa_handler = on_sigterm;
    sigemptyset(&handler.sa_mask);
    sigaction(SIGTERM, &handler, nullptr);
    std::signal(SIGPIPE, SIG_IGN);
    void* pointer = allocate(log);
    raise(SIGTERM);
    raise(SIGPIPE);
    struct sigaction now {};
    sigaction(SIGTERM, nullptr, &now);
    log.line("call sigaction signal=%d own_handler=%d", SIGTERM, now.sa_handler == on_sigterm);
    sigaction(SIGPIPE, nullptr, &now);
    log.line("call sigaction signal=%d ignored=%d", SIGPIPE, now.sa_handler == SIG_IGN);
    release(log, pointer);
    return 0;
}

} // namespace

int main(int argc, char** argv) {
    if (argc < 3) {
        std::fprintf(stderr, "usage: process_end <log> <mode>\n");
        return 2;
    }
    const AllocationLog log(argv[1]);
    g_log = &log;
    const std::string_view mode = argv[2];
    if (mode == "own_sigterm_handler")
        return keep_own_handlers(log);
    void* pointer = allocate(log);
    if (mode == "_exit5")
        _exit(5);
    if (mode == "raise_segv") {
        raise(SIGSEGV);
        return 1; // not reached: SIGSEGV's default action ends the process
    }
    if (mode == "mark")
        gpuleak_try_mark("after warmup");
    release(log, pointer);
    if (mode == "return0" || mode == "mark")
        return 0;
    if (mode == "return3")
        return 3;
    std::fprintf(stderr, "process_end: unknown mode '%s'\n", argv[2]);
    return 2;
}
