// Scenario with a known answer: allocations come and go, nothing accumulates; the report must not
// call it a leak. Arguments as scenario_leak's: iterations, step sleep and idling (ms), "unmarked".
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "gpuleak/gpuleak.h"

extern "C" int cudaMalloc(void** pointer, size_t size);
extern "C" int cudaFree(void* pointer);

int main(int argc, char** argv) {
    const int iterations = argc > 1 ? std::atoi(argv[1]) : 20;
    const std::chrono::milliseconds step_sleep(argc > 2 ? std::atoi(argv[2]) : 0);
    const std::chrono::milliseconds idle(argc > 3 ? std::atoi(argv[3]) : 0);
    const bool marked = argc <= 4 || std::strcmp(argv[4], "unmarked") != 0;
    constexpr size_t kMiB = size_t{1} << 20;
    void* weights = nullptr;
    cudaMalloc(&weights, 32 * kMiB);
    std::this_thread::sleep_for(idle);
    for (int i = 0; i < iterations; ++i) {
        std::this_thread::sleep_for(step_sleep);
        if (marked) {
            char label[32];
            std::snprintf(label, sizeof label, "iteration %d", i);
            gpuleak_try_mark(label);
        }
        void* batch[4] = {};
        for (void*& buffer : batch)
            cudaMalloc(&buffer, 4 * kMiB);
        for (void* buffer : batch)
            cudaFree(buffer);
    }
    std::this_thread::sleep_for(idle);
    cudaFree(weights);
    return 0;
}
