// The demo: a small "training loop" on the CUDA runtime. Each epoch allocates activations and frees
// them, but keeps one "loss history" buffer alive per epoch: a leak that grows every epoch, the kind
// gpuleak is for. Epochs are marked through the optional C API, so the demo runs with or without
// gpuleak loaded.
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "gpuleak/gpuleak.h"

extern "C" {
int cudaMalloc(void** pointer, size_t size);
int cudaFree(void* pointer);
int cudaMemGetInfo(size_t* free_bytes, size_t* total_bytes);
}

namespace {

constexpr size_t kMiB = size_t{1} << 20;

void* allocate(size_t bytes) {
    void* pointer = nullptr;
    if (cudaMalloc(&pointer, bytes) != 0) {
        std::fprintf(stderr, "demo: cudaMalloc(%zu MiB) failed\n", bytes / kMiB);
        return nullptr;
    }
    return pointer;
}

void* keep_loss_history(size_t bytes) {
    return allocate(bytes);
}

void run_epoch(std::vector<void*>& history) {
    std::vector<void*> activations;
    for (int layer = 0; layer < 8; ++layer)
        activations.push_back(allocate(16 * kMiB));
    history.push_back(keep_loss_history(4 * kMiB));
    for (void* activation : activations)
        cudaFree(activation);
}

} // namespace

int main(int argc, char** argv) {
    const int epochs = argc > 1 ? std::atoi(argv[1]) : 10;
    void* weights = allocate(256 * kMiB);
    std::vector<void*> history;
    for (int epoch = 0; epoch < epochs; ++epoch) {
        char label[32];
        std::snprintf(label, sizeof label, "epoch %d", epoch);
        gpuleak_try_mark(label);
        run_epoch(history);
    }
    size_t free_bytes = 0;
    size_t total_bytes = 0;
    cudaMemGetInfo(&free_bytes, &total_bytes);
    std::fprintf(stderr, "demo: %d epochs done, %zu MiB of %zu MiB device memory in use\n", epochs,
                 (total_bytes - free_bytes) / kMiB, total_bytes / kMiB);
    cudaFree(weights);
    return 0;
}
