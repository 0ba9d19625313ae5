// Processes that exec: LD_PRELOAD is inherited, so the new image records into a trace of its own.
//
// usage: exec_child <log> spawn    allocate, fork a child that execs "exec_child <log> leaf", allocate,
//                                  wait for it and log "child <pid> <child pid> <wait status>"
//        exec_child <log> reexec   allocate, then exec "exec_child <log>.leaf leaf" in the same process
//        exec_child <log> leaf     allocate two objects, free one, log "leaf <pid> <ppid>", return 0
//        exec_child <log> failexec allocate, exec a program that does not exist, log "failed <errno>",
//                                  return 0
//        exec_child <log> vfork    allocate; in a new thread, vfork a child that tries to exec a missing
//                                  program, then /bin/true (or calls _exit(127) if it cannot), log
//                                  "vforked <child pid> <wait status>" and allocate; then die of SIGKILL
#include <cerrno>
#include <csignal>
#include <cstring>
#include <string>
#include <sys/wait.h>
#include <thread>

#include "allocation_log.h"

namespace {

[[noreturn]] void exec_leaf(const char* self, const std::string& log_path) {
    std::string log_argument = log_path;
    std::string mode = "leaf";
    char* arguments[] = {const_cast<char*>(self), log_argument.data(), mode.data(), nullptr};
    ::execv(self, arguments);
    AllocationLog::fail("execv failed");
}

} // namespace

int main(int argc, char** argv) {
    if (argc != 3) {
        std::fprintf(stderr, "usage: exec_child <log> spawn|reexec|leaf|failexec|vfork\n");
        return 2;
    }
    const std::string mode = argv[2];
    const AllocationLog log(argv[1]);
    if (mode == "leaf") {
        void* first = log.allocate(300);
        log.allocate(301);
        log.release(first);
        log.line("leaf %d %d", ::getpid(), ::getppid());
        return 0;
    }
    if (mode == "reexec") {
        log.allocate(200);
        exec_leaf(argv[0], std::string(argv[1]) + ".leaf");
    }
    if (mode == "failexec") {
        log.allocate(400);
        char* arguments[] = {const_cast<char*>("missing"), nullptr};
        ::execv("/nonexistent/gpuleak-test-program", arguments);
        log.line("failed %d", errno);
        return 0;
    }
    if (mode == "vfork") {
        log.allocate(500);
        // From a thread that has recorded nothing yet, as a program's spawn may; its child first tries a
        // path that does not exist, as an exec along PATH does.
        std::thread([&log] {
            pid_t child = ::vfork();
            if (child == 0) {
                char* arguments[] = {const_cast<char*>("true"), nullptr};
                ::execv("/nonexistent/gpuleak-test-program", arguments);
                ::execv("/bin/true", arguments);
                ::_exit(127);
            }
            int status = 0;
            ::waitpid(child, &status, 0);
            log.line("vforked %d %d", child, status);
            log.allocate(600);
        }).join();
        // Killed, the parent leaves no end record of its own: whatever its trace says came from the child.
        ::raise(SIGKILL);
    }
    if (mode != "spawn")
        AllocationLog::fail("unknown mode");
    log.allocate(100);
    pid_t child = ::fork();
    if (child < 0)
        AllocationLog::fail("fork failed");
    if (child == 0)
        exec_leaf(argv[0], argv[1]);
    log.allocate(101);
    int status = 0;
    if (::waitpid(child, &status, 0) != child)
        AllocationLog::fail("waitpid failed");
    log.line("child %d %d %d", ::getpid(), child, status);
    return 0;
}
