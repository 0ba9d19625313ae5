// Scenario with a known answer: every iteration keeps one 1 MiB buffer alive (a per-iteration leak)
// next to weights allocated once; the report must call it a leak and name keep_history's line.
// Arguments: iterations (20), milliseconds each step sleeps (0), milliseconds of idling before and after
// the loop (0), and "unmarked" to set no markers: the verdict must not depend on any but the last.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
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
    cudaMalloc(&activations, 8 * kMiB); // scratch site
    cudaFree(activations);
}

} // namespace

int main(int argc, char** argv) {
    const int iterations = argc > 1 ? std::atoi(argv[1]) : 20;
    const std::chrono::milliseconds step_sleep(argc > 2 ? std::atoi(argv[2]) : 0);
    const std::chrono::milliseconds idle(argc > 3 ? std::atoi(argv[3]) : 0);
    const bool marked = argc <= 4 || std::strcmp(argv[4], "unmarked") != 0;
    void* weights = nullptr;
    cudaMalloc(&weights, 32 * kMiB); // weights site
    std::this_thread::sleep_for(idle);
    std::vector<void*> history;
    for (int i = 0; i < iterations; ++i) {
        if (marked) {
            char label[32];
            std::snprintf(label, sizeof label, "iteration %d", i);
            gpuleak_try_mark(label);
        }
        step();
        history.push_back(keep_history());
        std::this_thread::sleep_for(step_sleep);
    }
    std::this_thread::sleep_for(idle);
    return 0;
}
