// Scenario with a known answer: a parent that does not leak forks a worker (a DataLoader-style
// child) that works on each batch in scratch memory and leaks one buffer per batch; the report on the
// parent's trace must find the child and diagnose each process separately.
#include <cstdlib>
#include <sys/wait.h>
#include <unistd.h>

extern "C" int cudaMalloc(void** pointer, size_t size);
extern "C" int cudaFree(void* pointer);

namespace {

constexpr size_t kMiB = size_t{1} << 20;

__attribute__((noinline)) void worker_keeps_batch() {
    void* batch = nullptr;
    cudaMalloc(&batch, 2 * kMiB); // worker leak site
}

__attribute__((noinline)) void worker_decodes_batch() {
    void* scratch = nullptr;
    cudaMalloc(&scratch, kMiB);
    cudaFree(scratch);
}

} // namespace

int main() {
    void* weights = nullptr;
    cudaMalloc(&weights, 8 * kMiB);
    pid_t child = fork();
    if (child == 0) {
        for (int i = 0; i < 10; ++i) {
            worker_decodes_batch();
            worker_keeps_batch();
            usleep(2000);
        }
        _exit(0);
    }
    for (int i = 0; i < 10; ++i) {
        void* scratch = nullptr;
        cudaMalloc(&scratch, 4 * kMiB);
        cudaFree(scratch);
        usleep(2000);
    }
    int status = 0;
    waitpid(child, &status, 0);
    cudaFree(weights);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}
