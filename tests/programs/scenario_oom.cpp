// Scenario with a known answer: allocates 16 MiB buffers until the (simulated) device is full; the
// report must show the failed allocation, its size and line, and what was held at that moment.
#include <cstdio>
#include <cstdlib>

extern "C" int cudaMalloc(void** pointer, size_t size);

namespace {

__attribute__((noinline)) int grab(void** buffer) {
    const int error = cudaMalloc(buffer, size_t{16} << 20); // oom site
    if (error != 0)
        std::fprintf(stderr, "scenario_oom: cudaMalloc failed with %d\n", error);
    return error;
}

} // namespace

int main() {
    for (int i = 0; i < 1000; ++i) {
        void* buffer = nullptr;
        if (grab(&buffer) != 0)
            return 0;
    }
    return 1;
}
