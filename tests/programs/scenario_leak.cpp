// Scenario with a known answer: every iteration keeps one 1 MiB buffer alive (a per-iteration leak)
// next to weights allocated once; the report must call it a leak and name keep_history's line.
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "gpuleak/gpuleak.h"

extern "C" int cudaMalloc(void** pointer, size_t size);
extern "C" int cudaFree(void* pointer);

namespace {

constexpr size_t kMiB = size_t{1} << 20;

__attribute__((noinline)) void* keep_history() {
    void* buffer = nullptr;
    cudaMalloc(&buffer, kMiB); // leak site
    return buffer;
}

__attribute__((noinline)) void step() {
    void* activations = nullptr;
    cudaMalloc(&activations, 8 * kMiB);
    cudaFree(activations);
}

} // namespace

int main(int argc, char** argv) {
    const int iterations = argc > 1 ? std::atoi(argv[1]) : 20;
    void* weights = nullptr;
    cudaMalloc(&weights, 32 * kMiB); // weights site
    std::vector<void*> history;
    for (int i = 0; i < iterations; ++i) {
        char label[32];
        std::snprintf(label, sizeof label, "iteration %d", i);
        gpuleak_try_mark(label);
        step();
        history.push_back(keep_history());
    }
    return 0;
}
