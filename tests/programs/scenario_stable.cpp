// Scenario with a known answer: allocations come and go, nothing accumulates; the report must not
// call it a leak.
#include <cstdio>
#include <cstdlib>

#include "gpuleak/gpuleak.h"

extern "C" int cudaMalloc(void** pointer, size_t size);
extern "C" int cudaFree(void* pointer);

int main(int argc, char** argv) {
    const int iterations = argc > 1 ? std::atoi(argv[1]) : 20;
    constexpr size_t kMiB = size_t{1} << 20;
    void* weights = nullptr;
    cudaMalloc(&weights, 32 * kMiB);
    for (int i = 0; i < iterations; ++i) {
        char label[32];
        std::snprintf(label, sizeof label, "iteration %d", i);
        gpuleak_try_mark(label);
        void* batch[4] = {};
        for (void*& buffer : batch)
            cudaMalloc(&buffer, 4 * kMiB);
        for (void* buffer : batch)
            cudaFree(buffer);
    }
    cudaFree(weights);
    return 0;
}
