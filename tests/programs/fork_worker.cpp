// The DataLoader-worker pattern: a process that already uses CUDA forks workers that allocate too.
// The parent allocates, forks `workers` children and allocates more while they run. Each child allocates,
// frees some of its own, frees one of the parent's objects (its copy, inherited with the address space)
// and ends with exit() or _exit(). The parent logs each child's pid and wait status and returns `code`;
// the children end with `code` too. _Fork (glibc 2.34) forks without the pthread_atfork handlers.
//
// usage: fork_worker <log> fork|_Fork exit|_exit <workers> <code>
#include <cstring>
#include <sys/wait.h>
#include <vector>

#include "allocation_log.h"

namespace {

[[noreturn]] void run_worker(const AllocationLog& log, void* parents_object, bool use_exit, int code) {
    std::vector<void*> mine;
    for (size_t i = 0; i < 4; ++i)
        mine.push_back(log.allocate(2048 + i));
    log.release(mine[0]);
    log.release(mine[2]);
    log.release(parents_object);
    if (use_exit)
        std::exit(code);
    ::_exit(code);
}

} // namespace

int main(int argc, char** argv) {
    if (argc != 6 || (std::strcmp(argv[2], "fork") != 0 && std::strcmp(argv[2], "_Fork") != 0) ||
        (std::strcmp(argv[3], "exit") != 0 && std::strcmp(argv[3], "_exit") != 0)) {
        std::fprintf(stderr, "usage: fork_worker <log> fork|_Fork exit|_exit <workers> <code>\n");
        return 2;
    }
    const AllocationLog log(argv[1]);
    const bool use_fork = std::strcmp(argv[2], "fork") == 0;
    const bool use_exit = std::strcmp(argv[3], "exit") == 0;
    const int workers = std::atoi(argv[4]);
    const int code = std::atoi(argv[5]);

    std::vector<void*> before;
    for (size_t i = 0; i < 3; ++i)
        before.push_back(log.allocate(1024 + i));
    std::vector<pid_t> children;
    for (int w = 0; w < workers; ++w) {
        pid_t child = use_fork ? ::fork() : ::_Fork();
        if (child < 0)
            AllocationLog::fail("fork failed");
        if (child == 0)
            run_worker(log, before[0], use_exit, code);
        children.push_back(child);
    }
    void* after = log.allocate(4096);
    log.allocate(4097);
    log.release(after);
    log.release(before[1]);
    for (pid_t child : children) {
        int status = 0;
        if (::waitpid(child, &status, 0) != child)
            AllocationLog::fail("waitpid failed");
        log.line("child %d %d %d", ::getpid(), child, status);
    }
    return code;
}
