// process_end <log> <mode>: allocates, then ends the process the way <mode> says:
//   return0, return3       frees and returns that status from main
//   _exit5                 calls _exit(5) with the allocation still live
//   raise_segv             raises SIGSEGV with the allocation still live
//   own_sigterm_handler    installs a SIGTERM handler and ignores SIGPIPE before touching CUDA, raises
//                          both, logs whether its handler is still installed, frees, returns 0
//   mark                   records a marker through the optional C API between allocation and free
//   chain_sigterm,         installs a handler for that signal after touching CUDA that chains to the
//   chain_sigsegv          handler it found, as crash reporters do, then raises the signal; exits 99
//                          when its handler runs more than 5 times
//   reenter                for a second, calls the C API in a loop while a timer's signal handler calls
//                          it too, interrupting the loop inside it; logs how often the handler ran
// Calls are logged as in api_families; the program runs the same with and without gpuleak.
#include <csignal>
#include <cstdio>
#include <cstring>
#include <string_view>
#include <sys/time.h>
#include <time.h>
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

struct sigaction g_found {};
volatile sig_atomic_t g_chained = 0;

// What a crash reporter does: its own work, then whatever handled the signal before it.
void chain_to_found(int signal_number) {
    g_chained = g_chained + 1;
    if (g_chained > 5)
        _exit(99);
    if (g_found.sa_handler == SIG_DFL || g_found.sa_handler == SIG_IGN) {
        signal(signal_number, g_found.sa_handler);
        raise(signal_number);
    } else if ((g_found.sa_flags & SA_SIGINFO) != 0) {
        g_found.sa_sigaction(signal_number, nullptr, nullptr);
    } else {
        g_found.sa_handler(signal_number);
    }
    // What it does after the handler it found returns (flushing its report): the signal is delivered
    // once this handler returns.
    g_log->line("call chained_handler_returned signal=%d", signal_number);
}

int chain(const AllocationLog& log, int signal_number) {
    struct sigaction handler {};
    handler.sa_handler = chain_to_found;
    sigemptyset(&handler.sa_mask);
    sigaction(signal_number, &handler, &g_found);
    log.line("call sigaction signal=%d chained", signal_number);
    raise(signal_number);
    return 1; // not reached: the signal's default action ends the process
}

volatile sig_atomic_t g_handled = 0;
char g_handler_blocks[2];

// Interrupts the loop below, often inside the library: the calls either record or are dropped, and
// return either way.
void on_alarm(int) {
    gpuleak_try_mark("from the handler");
    gpuleak_try_block_alloc(&g_handler_blocks[0], 64, 0);
    gpuleak_try_block_free(&g_handler_blocks[0]);
    g_handled = g_handled + 1;
}

int reenter(const AllocationLog& log, void* pointer) {
    // Resolved here: dlsym in the handler would not be async-signal-safe.
    gpuleak_try_mark("before the timer");
    gpuleak_try_block_alloc(&g_handler_blocks[1], 64, 0);
    gpuleak_try_block_free(&g_handler_blocks[1]);
    struct sigaction alarm {};
    alarm.sa_handler = on_alarm;
    alarm.sa_flags = SA_RESTART;
    sigemptyset(&alarm.sa_mask);
    sigaction(SIGALRM, &alarm, nullptr);
    const itimerval every_50_us{{0, 50}, {0, 50}};
    setitimer(ITIMER_REAL, &every_50_us, nullptr);
    static char blocks[256];
    timespec start{};
    timespec now{};
    clock_gettime(CLOCK_MONOTONIC, &start);
    do {
        for (char& block : blocks) {
            gpuleak_try_block_alloc(&block, 64, 0);
            gpuleak_try_mark("in the loop");
            gpuleak_try_block_free(&block);
        }
        clock_gettime(CLOCK_MONOTONIC, &now);
    } while (now.tv_sec - start.tv_sec < 1);
    const itimerval stop{};
    setitimer(ITIMER_REAL, &stop, nullptr);
    log.line("call handler ran=%d", g_handled > 0 ? 1 : 0);
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
    if (mode == "reenter")
        return reenter(log, pointer);
    if (mode == "chain_sigterm")
        return chain(log, SIGTERM);
    if (mode == "chain_sigsegv")
        return chain(log, SIGSEGV);
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
