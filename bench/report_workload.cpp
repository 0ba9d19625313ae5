// The report benchmark's program (bench/report_throughput.sh runs it): makes the allocations whose
// trace gpuleak-report, or heaptrack_print, is then timed on. Not itself timed.
//
//   bench_report_workload cuda|malloc --pairs N [--window W] [--keep-every K] [--unmarked]
//
// N allocations, each freed again except every K-th, which stays live to the end (a slow leak); the
// others live until W newer ones have been made, so frees trail their allocations as in a real
// program and W allocations of any moment are live. The calls come from 256 distinct call stacks: each
// batch of allocations is made below a chain of 8 functions picked from two by the bits of its site
// number. Sizes vary by site. `cuda` calls cudaMalloc/cudaFree (the simulated device here), `malloc`
// calls malloc/free, with the same stacks, sizes and order. One marker per hundredth of the run, as a
// training loop marks its steps (does nothing without gpuleak); none with --unmarked, as most programs
// set none: the report then judges what was kept by the repetitions of the work between them. At the
// end the program frees what the window still holds and prints one line:
//
//   bench_report_workload mode=cuda allocations=500000 frees=499500 kept=500 sites=256
//
// allocations + frees is the number of events the run made; a tool's trace may hold more (the program's
// own start-up allocations, under heaptrack) or fewer (gpuleak's ring keeps only the newest).
#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "gpuleak/gpuleak.h"

#include "bench_arguments.h"

extern "C" {
int cudaMalloc(void** pointer, size_t size);
int cudaFree(void* pointer);
}

namespace {

constexpr int kLevels = 8; // 2^8 = 256 distinct stacks
constexpr unsigned kSites = 1u << kLevels;
constexpr uint64_t kBatch = 64; // allocations per visit of a site
constexpr int kMarkers = 100;

enum class Mode { Cuda, Malloc };

struct Workload {
    Mode mode = Mode::Cuda;
    uint64_t pairs = 0;
    uint64_t keep_every = 1000;
    bool marked = true;
    std::vector<void*> window; // the live allocations that will be freed, oldest at `next`
    size_t next = 0;
    std::vector<void*> kept;
    uint64_t allocations = 0;
    uint64_t frees = 0;
};

void* allocate(Workload& work, size_t size) {
    void* pointer = nullptr;
    if (work.mode == Mode::Cuda)
        return cudaMalloc(&pointer, size) == 0 ? pointer : nullptr;
    return std::malloc(size);
}

bool release(Workload& work, void* pointer) {
    ++work.frees;
    if (work.mode == Mode::Cuda)
        return cudaFree(pointer) == 0;
    std::free(pointer);
    return true;
}

// The innermost frame of every stack: the same call instructions whatever the route here.
__attribute__((noinline)) bool at_site(Workload& work, unsigned site, uint64_t count) {
    for (uint64_t i = 0; i < count; ++i) {
        // 256 bytes to 16 KiB: small enough that the window and the kept ones fit any machine.
        const size_t size = 256 * (1 + (site * 7 + i) % 64);
        void* pointer = allocate(work, size);
        if (pointer == nullptr)
            return false;
        if (++work.allocations % work.keep_every == 0) {
            work.kept.push_back(pointer);
            continue;
        }
        void*& slot = work.window[work.next];
        if (slot != nullptr && !release(work, slot))
            return false;
        slot = pointer;
        work.next = (work.next + 1) % work.window.size();
    }
    return true;
}

bool route(Workload& work, unsigned site, int level, uint64_t count);

// Two functions, so that the bits of the site number choose the chain of return addresses. The barrier
// after each call keeps it from becoming a tail call that would reuse the frame.
__attribute__((noinline)) bool via_left(Workload& work, unsigned site, int level, uint64_t count) {
    const bool ok = route(work, site, level + 1, count);
    asm volatile("" : : : "memory");
    return ok;
}

__attribute__((noinline)) bool via_right(Workload& work, unsigned site, int level, uint64_t count) {
    const bool ok = route(work, site, level + 1, count);
    asm volatile("" : : : "memory");
    return ok;
}

bool route(Workload& work, unsigned site, int level, uint64_t count) {
    if (level == kLevels)
        return at_site(work, site, count);
    return ((site >> level) & 1u) != 0 ? via_right(work, site, level, count)
                                       : via_left(work, site, level, count);
}

// Sites visited in a scrambled but fixed order, so that consecutive batches come from unrelated stacks.
unsigned site_of(uint64_t batch) {
    uint64_t x = batch * 0x9E3779B97F4A7C15ull;
    x ^= x >> 29;
    return static_cast<unsigned>(x % kSites);
}

int run(Workload& work) {
    const uint64_t per_marker = work.pairs / kMarkers + 1;
    uint64_t next_marker = 0;
    for (uint64_t batch = 0; work.allocations < work.pairs; ++batch) {
        if (work.marked && work.allocations >= next_marker) {
            char label[32];
            std::snprintf(label, sizeof label, "step %llu", static_cast<unsigned long long>(batch));
            gpuleak_try_mark(label);
            next_marker += per_marker;
        }
        const uint64_t count = std::min(kBatch, work.pairs - work.allocations);
        if (!route(work, site_of(batch), 0, count)) {
            std::fprintf(stderr, "bench_report_workload: an allocation or free failed\n");
            return 1;
        }
    }
    for (void*& pointer : work.window) {
        if (pointer != nullptr && !release(work, pointer)) {
            std::fprintf(stderr, "bench_report_workload: a free failed\n");
            return 1;
        }
        pointer = nullptr;
    }
    std::printf("bench_report_workload mode=%s allocations=%llu frees=%llu kept=%zu sites=%u\n",
                work.mode == Mode::Cuda ? "cuda" : "malloc",
                static_cast<unsigned long long>(work.allocations),
                static_cast<unsigned long long>(work.frees), work.kept.size(), kSites);
    return 0;
}

int usage() {
    std::fprintf(stderr, "usage: bench_report_workload cuda|malloc --pairs N [--window W] [--keep-every K] "
                         "[--unmarked]\n");
    return 2;
}

} // namespace

int main(int argc, char** argv) {
    if (argc < 2)
        return usage();
    Workload work;
    if (std::strcmp(argv[1], "cuda") == 0)
        work.mode = Mode::Cuda;
    else if (std::strcmp(argv[1], "malloc") == 0)
        work.mode = Mode::Malloc;
    else
        return usage();
    uint64_t window = 4096;
    for (int i = 2; i < argc; ++i) {
        if (std::strcmp(argv[i], "--unmarked") == 0) {
            work.marked = false;
            continue;
        }
        if (i + 1 >= argc)
            return usage();
        const char* flag = argv[i];
        const char* value = argv[++i];
        uint64_t number = 0;
        if (std::strcmp(flag, "--pairs") == 0 && parse_count(value, 1, number))
            work.pairs = number;
        else if (std::strcmp(flag, "--window") == 0 && parse_count(value, 1, number) && number <= (1u << 24))
            window = number;
        else if (std::strcmp(flag, "--keep-every") == 0 && parse_count(value, 2, number))
            work.keep_every = number;
        else
            return usage();
    }
    if (work.pairs == 0)
        return usage();
    work.window.assign(window, nullptr);
    return run(work);
}
