// Scenario with a known answer: a loop whose every step works in scratch memory and keeps one buffer,
// every few milliseconds until it is killed with SIGKILL; the report must say it was killed and still
// name the leak. (Without the step's scratch, the kept buffers would be one stretch of allocations, as a
// model's parameters are: set-up, not a leak.)
#include <unistd.h>

extern "C" int cudaMalloc(void** pointer, size_t size);
extern "C" int cudaFree(void* pointer);

namespace {

__attribute__((noinline)) void hold_buffer() {
    void* buffer = nullptr;
    cudaMalloc(&buffer, size_t{3} << 20); // killed leak site
}

__attribute__((noinline)) void step() {
    void* activations = nullptr;
    cudaMalloc(&activations, size_t{8} << 20);
    cudaFree(activations);
}

} // namespace

int main() {
    for (;;) {
        step();
        hold_buffer();
        usleep(5000);
    }
}
