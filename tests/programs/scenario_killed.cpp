// Scenario with a known answer: leaks a buffer every few milliseconds until it is killed with
// SIGKILL; the report must say it was killed and still name the leak.
#include <unistd.h>

extern "C" int cudaMalloc(void** pointer, size_t size);

namespace {

__attribute__((noinline)) void hold_buffer() {
    void* buffer = nullptr;
    cudaMalloc(&buffer, size_t{3} << 20); // killed leak site
}

} // namespace

int main() {
    for (;;) {
        hold_buffer();
        usleep(5000);
    }
}
