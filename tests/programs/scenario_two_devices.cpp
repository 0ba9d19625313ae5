// Scenario with a known answer on two devices, a model split in two stages: the first stage's weights
// (48 MiB) and an 8 MiB scratch buffer each step on cuda:0; the second stage's weights (16 MiB), a 4 MiB
// scratch buffer, a 1 MiB buffer kept each step (the leak), and a 2 MiB buffer handed back to the first
// stage, which frees it with cuda:0 current, on cuda:1. Run with GPULEAK_SIM_DEVICES=2.
// Arguments: iterations (20), milliseconds each step sleeps before the first stage frees the buffer (0).
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>

#include "gpuleak/gpuleak.h"

extern "C" int cudaMalloc(void** pointer, size_t size);
extern "C" int cudaFree(void* pointer);
extern "C" int cudaSetDevice(int device);

namespace {

constexpr size_t kMiB = size_t{1} << 20;

void* allocate(size_t size) {
    void* pointer = nullptr;
    if (cudaMalloc(&pointer, size) != 0) {
        std::fprintf(stderr, "cudaMalloc of %zu bytes failed\n", size);
        std::exit(1);
    }
    return pointer;
}

__attribute__((noinline)) void* keep_history() {
    return allocate(kMiB); // leak site
}

__attribute__((noinline)) void stage(int device, size_t scratch) {
    cudaSetDevice(device);
    cudaFree(allocate(scratch));
}

} // namespace

int main(int argc, char** argv) {
    const int iterations = argc > 1 ? std::atoi(argv[1]) : 20;
    const std::chrono::milliseconds step_sleep(argc > 2 ? std::atoi(argv[2]) : 0);
    cudaSetDevice(0);
    void* first_weights = allocate(48 * kMiB);
    cudaSetDevice(1);
    void* second_weights = allocate(16 * kMiB);
    std::vector<void*> history;
    for (int i = 0; i < iterations; ++i) {
        char label[32];
        std::snprintf(label, sizeof label, "iteration %d", i);
        gpuleak_try_mark(label);
        stage(0, 8 * kMiB);
        stage(1, 4 * kMiB);
        history.push_back(keep_history());
        void* handed_back = allocate(2 * kMiB);
        std::this_thread::sleep_for(step_sleep);
        cudaSetDevice(0);
        if (cudaFree(handed_back) != 0) {
            std::fprintf(stderr, "cudaFree of cuda:1's buffer with cuda:0 current failed\n");
            return 1;
        }
    }
    (void)first_weights;
    (void)second_weights;
    return 0;
}
