// The overhead benchmark's program: descends to a fixed stack depth, then times N allocation/free
// pairs (or N stack captures) made from that depth, and prints the cost per pair as one line:
//
//   bench_alloc_pairs mode=cuda depth=20 frames=20 size=256 pairs=2000000 warmup=300000
//   ns_per_pair=97.20 cpu_ns_per_pair=96.50                               (one line, wrapped here)
//
// Modes: `cuda` (cudaMalloc/cudaFree, linked against the CUDA runtime; the simulated one here),
// `malloc` (malloc/free of the same size), `unwind` (libunwind's unw_backtrace of the whole stack, the
// floor of native stack capture). `depth` is the number of frames on the stack at the call site, the
// calling function's own frame and those of main and the C library's start-up code included; `frames`
// is what unw_backtrace actually found there. `ns_per_pair` is wall-clock (CLOCK_MONOTONIC) time,
// `cpu_ns_per_pair` the thread's CPU time. The warm-up pairs run from the same call site before the
// clock starts, so one-time costs (a recorder's trace file, the first capture of the stack) are not in
// the figure. A benchmark: see bench/README.md.
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>

#define UNW_LOCAL_ONLY
#include <libunwind.h>

#include "bench_arguments.h"

extern "C" {
int cudaMalloc(void** pointer, size_t size);
int cudaFree(void* pointer);
}

namespace {

enum class Mode { Cuda, Malloc, Unwind };

struct Options {
    Mode mode = Mode::Cuda;
    const char* mode_name = "cuda";
    int depth = 20;
    uint64_t pairs = 2000000;
    uint64_t warmup = 300000;
    size_t size = 256;
};

constexpr int kMaxFrames = 256;

// The pointer escapes: the compiler may neither drop a malloc/free pair nor merge iterations.
inline void escape(void* pointer) {
    asm volatile("" : : "r"(pointer) : "memory");
}

uint64_t clock_ns(clockid_t clock) {
    timespec now{};
    clock_gettime(clock, &now);
    return static_cast<uint64_t>(now.tv_sec) * 1000000000ull + static_cast<uint64_t>(now.tv_nsec);
}

// The frames on the caller's stack, the caller's own frame included and this function's left out.
__attribute__((noinline)) int frames_of_caller() {
    void* buffer[kMaxFrames];
    int count = unw_backtrace(buffer, kMaxFrames);
    asm volatile("" : : : "memory");
    return count - 1;
}

// Runs `count` pairs of the mode from this frame, the innermost; with `frames`, first counts the frames
// on the stack here. Returns false when an allocation failed.
__attribute__((noinline)) bool run_pairs(const Options& options, uint64_t count, int* frames) {
    if (frames != nullptr)
        *frames = frames_of_caller();
    switch (options.mode) {
    case Mode::Cuda:
        for (uint64_t i = 0; i < count; ++i) {
            void* pointer = nullptr;
            if (cudaMalloc(&pointer, options.size) != 0)
                return false;
            escape(pointer);
            if (cudaFree(pointer) != 0)
                return false;
        }
        return true;
    case Mode::Malloc:
        for (uint64_t i = 0; i < count; ++i) {
            void* pointer = std::malloc(options.size);
            if (pointer == nullptr)
                return false;
            escape(pointer);
            std::free(pointer);
        }
        return true;
    case Mode::Unwind:
        for (uint64_t i = 0; i < count; ++i) {
            void* buffer[kMaxFrames];
            int found = unw_backtrace(buffer, kMaxFrames);
            escape(buffer);
            if (found <= 0)
                return false;
        }
        return true;
    }
    return false;
}

// Warms up, then times. Both rounds call run_pairs from the same instruction, so the timed pairs
// have exactly the stack of the warm-up pairs (a recorder has already seen it). Returns the
// process's exit status.
__attribute__((noinline)) int measure(const Options& options) {
    int frames = 0;
    uint64_t elapsed = 0;
    uint64_t cpu_elapsed = 0;
    int rounds = 2;
    asm volatile("" : "+r"(rounds)); // not unrolled: one call site
    for (int round = 0; round < rounds; ++round) {
        const bool timed = round > 0;
        const uint64_t start = clock_ns(CLOCK_MONOTONIC);
        const uint64_t cpu_start = clock_ns(CLOCK_THREAD_CPUTIME_ID);
        const bool ok = run_pairs(options, timed ? options.pairs : options.warmup, timed ? nullptr : &frames);
        cpu_elapsed = clock_ns(CLOCK_THREAD_CPUTIME_ID) - cpu_start;
        elapsed = clock_ns(CLOCK_MONOTONIC) - start;
        if (!ok) {
            std::fprintf(stderr, "bench_alloc_pairs: %s failed%s\n", options.mode_name,
                         timed ? "" : " during warm-up");
            return 1;
        }
    }
    std::printf("bench_alloc_pairs mode=%s depth=%d frames=%d size=%zu pairs=%llu warmup=%llu "
                "ns_per_pair=%.2f cpu_ns_per_pair=%.2f\n",
                options.mode_name, options.depth, frames, options.size,
                static_cast<unsigned long long>(options.pairs),
                static_cast<unsigned long long>(options.warmup),
                static_cast<double>(elapsed) / static_cast<double>(options.pairs),
                static_cast<double>(cpu_elapsed) / static_cast<double>(options.pairs));
    return 0;
}

// One real frame per level: not inlined, and the barrier after the call keeps it from becoming a
// tail call that would reuse this frame.
__attribute__((noinline)) int descend(const Options& options, int levels) {
    int status = levels > 0 ? descend(options, levels - 1) : measure(options);
    asm volatile("" : : : "memory");
    return status;
}

int usage() {
    std::fprintf(stderr,
                 "usage: bench_alloc_pairs cuda|malloc|unwind [--pairs N] [--warmup N] [--depth FRAMES] "
                 "[--size BYTES]\n");
    return 2;
}

} // namespace

int main(int argc, char** argv) {
    if (argc < 2)
        return usage();
    Options options;
    options.mode_name = argv[1];
    if (std::strcmp(argv[1], "cuda") == 0)
        options.mode = Mode::Cuda;
    else if (std::strcmp(argv[1], "malloc") == 0)
        options.mode = Mode::Malloc;
    else if (std::strcmp(argv[1], "unwind") == 0)
        options.mode = Mode::Unwind;
    else
        return usage();
    for (int i = 2; i < argc; ++i) {
        if (i + 1 >= argc)
            return usage();
        const char* flag = argv[i];
        const char* value = argv[++i];
        uint64_t number = 0;
        if (std::strcmp(flag, "--pairs") == 0 && parse_count(value, 1, number))
            options.pairs = number;
        else if (std::strcmp(flag, "--warmup") == 0 && parse_count(value, 0, number))
            options.warmup = number;
        else if (std::strcmp(flag, "--depth") == 0 && parse_count(value, 1, number) && number <= 200)
            options.depth = static_cast<int>(number);
        else if (std::strcmp(flag, "--size") == 0 && parse_count(value, 1, number) && number <= (1u << 30))
            options.size = number;
        else
            return usage();
    }
    // main's frame and those below it (the C library's start-up) count towards the depth, and so do
    // descend's (levels + 1 of them), measure's and run_pairs', the innermost.
    const int below = frames_of_caller();
    const int levels = options.depth - below - 3;
    if (levels < 0) {
        std::fprintf(stderr, "bench_alloc_pairs: --depth must be at least %d here\n", below + 3);
        return 2;
    }
    return descend(options, levels);
}
