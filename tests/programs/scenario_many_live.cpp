// Scenario with a known answer: a long run that keeps a few small blocks every step (a loss and a
// metric, as a training loop that appends them to lists does) inside one large segment, frees a
// temporary each step, and every 16th step keeps a small device allocation of its own. Arguments:
// steps (100000), then "kill" to end by SIGKILL instead of exiting. The report must count every one of
// the 2 * steps blocks and steps / 16 allocations, however many that is.
#include <csignal>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "gpuleak/gpuleak.h"

extern "C" int cudaMalloc(void** pointer, size_t size);

namespace {

constexpr size_t kLossBytes = 512;
constexpr size_t kMetricBytes = 1024;
constexpr size_t kTemporaryBytes = 4096;
constexpr size_t kKeptAllocationBytes = 256;
constexpr int kKeepEvery = 16;

__attribute__((noinline)) void keep_loss(char* at) {
    gpuleak_try_block_alloc(at, kLossBytes, 0); // loss site
}

__attribute__((noinline)) void keep_metric(char* at) {
    gpuleak_try_block_alloc(at, kMetricBytes, 0); // metric site
}

__attribute__((noinline)) void forward(char* at) {
    gpuleak_try_block_alloc(at, kTemporaryBytes, 0);
    gpuleak_try_block_free(at);
}

__attribute__((noinline)) void* keep_allocation() {
    void* pointer = nullptr;
    cudaMalloc(&pointer, kKeptAllocationBytes); // allocation site
    return pointer;
}

} // namespace

int main(int argc, char** argv) {
    const uint64_t steps = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 100000;
    const bool kill = argc > 2 && std::strcmp(argv[2], "kill") == 0;
    const uint64_t per_step = kLossBytes + kMetricBytes;
    void* segment = nullptr;
    if (cudaMalloc(&segment, steps * per_step + kTemporaryBytes) != 0) // segment site
        return 1;
    auto* cursor = static_cast<char*>(segment);
    char* const temporary = cursor + steps * per_step;
    std::vector<void*> kept;
    for (uint64_t step = 0; step < steps; ++step) {
        forward(temporary);
        keep_loss(cursor);                // loss call
        keep_metric(cursor + kLossBytes); // metric call
        cursor += per_step;
        if (step % kKeepEvery == 0)
            kept.push_back(keep_allocation());
    }
    if (kill)
        std::raise(SIGKILL);
    return 0;
}
