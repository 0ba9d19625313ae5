// A command for gpuleak run's tests: allocates GPU memory from a function of its own, then ends as its
// mode says.
//
// usage: launched_command exit <code>   prints "hello" on stdout, returns <code>
//        launched_command raise <signal> raises <signal> (SIGKILL included) with the allocation live
//        launched_command trap           blocks SIGINT, prints "ready", waits for SIGINT and returns 42
//                                        after printing "caught SIGINT from <sending pid>"
//        launched_command wait           prints "ready" and waits for a signal to end it
//        launched_command show           prints LD_PRELOAD, every GPULEAK_* variable and "loaded <path>"
//                                        for each shared object loaded, allocates nothing, returns 0
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <link.h>
#include <string>
#include <unistd.h>

extern "C" int cudaMalloc(void** pointer, size_t size);

extern char** environ;

namespace {

__attribute__((noinline)) void* hold_launched_buffer() {
    void* buffer = nullptr;
    if (cudaMalloc(&buffer, size_t{2} << 20) != 0) {
        std::fprintf(stderr, "launched_command: cudaMalloc failed\n");
        std::exit(2);
    }
    return buffer;
}

int show() {
    const char* preload = std::getenv("LD_PRELOAD");
    std::printf("LD_PRELOAD=%s\n", preload != nullptr ? preload : "");
    for (char** entry = environ; *entry != nullptr; ++entry)
        if (std::strncmp(*entry, "GPULEAK_", 8) == 0)
            std::printf("%s\n", *entry);
    dl_iterate_phdr(
        [](dl_phdr_info* info, size_t, void*) {
            if (info->dlpi_name != nullptr && info->dlpi_name[0] != '\0')
                std::printf("loaded %s\n", info->dlpi_name);
            return 0;
        },
        nullptr);
    return 0;
}

int trap() {
    // Blocked before "ready": the test signals once it reads that line, and the signal waits for us.
    sigset_t interrupt;
    sigemptyset(&interrupt);
    sigaddset(&interrupt, SIGINT);
    sigprocmask(SIG_BLOCK, &interrupt, nullptr);
    std::printf("ready\n");
    std::fflush(stdout);
    siginfo_t info{};
    if (sigwaitinfo(&interrupt, &info) != SIGINT)
        return 2;
    std::printf("caught SIGINT from %d\n", static_cast<int>(info.si_pid));
    return 42;
}

} // namespace

int main(int argc, char** argv) {
    const std::string mode = argc > 1 ? argv[1] : "";
    if (mode == "show" && argc == 2)
        return show();
    if (mode == "trap" && argc == 2) {
        hold_launched_buffer();
        return trap();
    }
    if (mode == "exit" && argc == 3) {
        hold_launched_buffer();
        std::printf("hello\n");
        return std::atoi(argv[2]);
    }
    if (mode == "wait" && argc == 2) {
        hold_launched_buffer();
        std::printf("ready\n");
        std::fflush(stdout);
        for (;;)
            pause();
    }
    if (mode == "raise" && argc == 3) {
        hold_launched_buffer();
        std::raise(std::atoi(argv[2]));
        return 2;
    }
    std::fprintf(stderr, "usage: launched_command exit <code> | raise <signal> | trap | wait | show\n");
    return 2;
}
