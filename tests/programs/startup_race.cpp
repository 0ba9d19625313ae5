// The first CUDA calls of a process made by many threads at once: the recorder starts (creates the
// trace, maps it, installs its process hooks) on whichever call comes first while the others arrive.
// The threads are created first and released together by a barrier, so that nothing before their
// first cudaMalloc has touched CUDA or gpuleak.
//
// usage: startup_race <log> <threads>
#include <barrier>
#include <thread>
#include <vector>

#include "allocation_log.h"

int main(int argc, char** argv) {
    if (argc != 3) {
        std::fprintf(stderr, "usage: startup_race <log> <threads>\n");
        return 2;
    }
    const AllocationLog log(argv[1]);
    const int threads = std::atoi(argv[2]);
    std::barrier start(threads);
    std::vector<std::thread> workers;
    for (int t = 0; t < threads; ++t) {
        workers.emplace_back([&, t] {
            start.arrive_and_wait();
            log.allocate(4096 + static_cast<size_t>(t));
        });
    }
    for (std::thread& worker : workers)
        worker.join();
    return 0;
}
