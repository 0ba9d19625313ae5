// Many threads allocating and freeing at once, all released together so that they meet in the recorder.
// Each thread makes `pairs` cudaMalloc/cudaFree pairs and, spread among them, `kept` allocations it never
// frees. Afterwards the program logs what it left live and how many calls it made, for the test to
// compare with the trace.
//
// usage: many_threads <log> <threads> <pairs per thread> <kept per thread>
#include <barrier>
#include <cstdlib>
#include <thread>
#include <vector>

#include "allocation_log.h"

namespace {

struct Kept {
    void* pointer;
    size_t size;
    pid_t thread;
};

// Sizes vary with the thread and the iteration so that a record attributed to the wrong call shows.
size_t pair_size(int thread, int iteration) {
    return 512 + static_cast<size_t>((iteration * 7 + thread * 131) % 4096) * 8;
}

size_t kept_size(int thread, int index) {
    return 100000 + static_cast<size_t>(thread) * 1000 + static_cast<size_t>(index);
}

} // namespace

int main(int argc, char** argv) {
    if (argc != 5) {
        std::fprintf(stderr, "usage: many_threads <log> <threads> <pairs per thread> <kept per thread>\n");
        return 2;
    }
    const AllocationLog log(argv[1]);
    const int threads = std::atoi(argv[2]);
    const int pairs = std::atoi(argv[3]);
    const int kept = std::atoi(argv[4]);

    std::vector<std::vector<Kept>> kept_by_thread(static_cast<size_t>(threads));
    std::barrier start(threads);
    std::vector<std::thread> workers;
    for (int t = 0; t < threads; ++t) {
        workers.emplace_back([&, t] {
            std::vector<Kept>& mine = kept_by_thread[static_cast<size_t>(t)];
            const int keep_every = kept > 0 ? pairs / kept : 0;
            start.arrive_and_wait();
            for (int i = 0; i < pairs; ++i) {
                if (keep_every > 0 && i % keep_every == 0 && static_cast<int>(mine.size()) < kept) {
                    const size_t size = kept_size(t, static_cast<int>(mine.size()));
                    void* pointer = nullptr;
                    if (cudaMalloc(&pointer, size) != 0)
                        AllocationLog::fail("cudaMalloc failed");
                    mine.push_back({pointer, size, ::gettid()});
                }
                void* pointer = nullptr;
                if (cudaMalloc(&pointer, pair_size(t, i)) != 0 || cudaFree(pointer) != 0)
                    AllocationLog::fail("cudaMalloc or cudaFree failed");
            }
        });
    }
    for (std::thread& worker : workers)
        worker.join();

    long long calls = 0;
    for (const std::vector<Kept>& mine : kept_by_thread) {
        for (const Kept& k : mine)
            log.line("alloc %d %d %#llx %zu", ::getpid(), k.thread, AllocationLog::address(k.pointer),
                     k.size);
        calls += 2LL * pairs + static_cast<long long>(mine.size());
    }
    log.line("calls %lld", calls);
    return 0;
}
