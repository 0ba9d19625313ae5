// Scenario with known answers about host memory: a parent that holds a 256 MiB dataset and uses the
// GPU forks a worker that never touches CUDA. What the worker does in its ten steps (argv[1]):
//   cow       writes to a tenth of the dataset's pages each step: its pages become its own copies
//   read      reads the dataset: nothing grows
//   grow      allocates and keeps 16 MiB each step
//   once      allocates 160 MiB in its first step, then works on without growing
//   shm       maps 16 MiB more of a shared-memory object each step
//   kill      grows as `grow`, then kills itself with SIGKILL in its sixth step
//   exec      replaces itself with /bin/true at once
//   execfail  tries to exec a program that does not exist, then works one step and exits
// argv[2]: milliseconds per step (default 50).
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <signal.h>
#include <string>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

extern "C" int cudaMalloc(void** pointer, size_t size);
extern "C" int cudaFree(void* pointer);

namespace {

constexpr size_t kMiB = size_t{1} << 20;
constexpr size_t kDatasetBytes = 256 * kMiB;
constexpr int kSteps = 10;

void pause_ms(int milliseconds) {
    if (milliseconds > 0)
        usleep(static_cast<useconds_t>(milliseconds) * 1000);
}

void touch(char* bytes, size_t size, char value) {
    for (size_t offset = 0; offset < size; offset += 4096)
        bytes[offset] = value;
}

[[noreturn]] void work(const std::string& mode, char* dataset, int step_ms) {
    std::vector<char*> kept;
    char* shared = nullptr;
    if (mode == "shm") {
        const std::string name = "/gpuleak-scenario-" + std::to_string(getpid());
        const int fd = shm_open(name.c_str(), O_RDWR | O_CREAT | O_EXCL, 0600);
        shm_unlink(name.c_str());
        if (fd < 0 || ftruncate(fd, kSteps * 16 * kMiB) != 0)
            _exit(2);
        shared =
            static_cast<char*>(mmap(nullptr, kSteps * 16 * kMiB, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0));
        close(fd);
        if (shared == MAP_FAILED)
            _exit(2);
    }
    if (mode == "exec") {
        execl("/bin/true", "true", static_cast<char*>(nullptr));
        _exit(3);
    }
    if (mode == "execfail") {
        execl("/nonexistent/gpuleak-no-such-program", "none", static_cast<char*>(nullptr));
        pause_ms(step_ms);
        _exit(0);
    }
    volatile unsigned long sum = 0;
    for (int step = 0; step < kSteps; ++step) {
        const size_t tenth = kDatasetBytes / kSteps;
        if (mode == "cow") {
            touch(dataset + step * tenth, tenth, 2);
        } else if (mode == "read") {
            for (size_t offset = 0; offset < kDatasetBytes; offset += 4096)
                sum = sum + static_cast<unsigned char>(dataset[offset]);
        } else if (mode == "grow" || mode == "kill" || (mode == "once" && step == 0)) {
            const size_t size = mode == "once" ? 160 * kMiB : 16 * kMiB;
            auto* block = static_cast<char*>(std::malloc(size));
            touch(block, size, 3);
            kept.push_back(block);
        } else if (mode == "shm") {
            touch(shared + step * 16 * kMiB, 16 * kMiB, 4);
        }
        if (mode == "kill" && step == 5)
            raise(SIGKILL);
        pause_ms(step_ms);
    }
    _exit(0);
}

} // namespace

int main(int argc, char** argv) {
    if (argc < 2)
        return 64;
    const std::string mode = argv[1];
    const int step_ms = argc > 2 ? std::atoi(argv[2]) : 50;
    auto* dataset = static_cast<char*>(std::malloc(kDatasetBytes));
    touch(dataset, kDatasetBytes, 1);
    void* weights = nullptr;
    cudaMalloc(&weights, 8 * kMiB);
    const pid_t child = fork();
    if (child == 0)
        work(mode, dataset, step_ms);
    int status = 0;
    waitpid(child, &status, 0);
    cudaFree(weights);
    std::printf("worker %d %s %d\n", static_cast<int>(child), WIFSIGNALED(status) ? "signal" : "exit",
                WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status));
    return 0;
}
