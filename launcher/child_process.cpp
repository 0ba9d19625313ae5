#include "launcher/child_process.h"

#include <cerrno>
#include <csignal>
#include <cstring>
#include <fcntl.h>
#include <fmt/format.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <system_error>
#include <unistd.h>

#include "launcher/launcher_error.h"

namespace gpuleak::launcher {

namespace {

std::vector<char*> pointers_to(std::vector<std::string>& strings) {
    std::vector<char*> pointers;
    pointers.reserve(strings.size() + 1);
    for (std::string& text : strings)
        pointers.push_back(text.data());
    pointers.push_back(nullptr);
    return pointers;
}

LauncherError exec_failure(const std::string& name, int error) {
    if (error == ENOENT)
        return LauncherError(name.find('/') == std::string::npos
                                 ? fmt::format("{}: command not found", name)
                                 : fmt::format("{}: {}", name, std::strerror(error)),
                             kNotFound);
    return LauncherError(fmt::format("{}: {}", name, std::strerror(error)), kCannotExecute);
}

} // namespace

pid_t start_command(const std::vector<std::string>& command, const std::vector<std::string>& environment,
                    const Supervision& supervision, bool die_with_launcher) {
    std::vector<std::string> arguments = command;
    std::vector<std::string> variables = environment;
    const std::vector<char*> argv = pointers_to(arguments);
    const std::vector<char*> envp = pointers_to(variables);
    // The child reports a failed exec through this pipe; a successful exec closes it (O_CLOEXEC), so the
    // launcher knows which happened before it says anything.
    int report[2];
    if (::pipe2(report, O_CLOEXEC) != 0)
        throw std::system_error(errno, std::generic_category(), "pipe2");
    const pid_t launcher = ::getpid();
    const pid_t child = ::fork();
    if (child < 0) {
        const int error = errno;
        ::close(report[0]);
        ::close(report[1]);
        throw LauncherError(fmt::format("cannot start {}: fork: {}", command[0], std::strerror(error)));
    }
    if (child == 0) {
        ::close(report[0]);
        supervision.restore_in_child();
        // A launcher that died before prctl took effect has no death left to signal: end at once.
        if (die_with_launcher && (::prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || ::getppid() != launcher))
            ::_exit(kLauncherFailed);
        // execvpe searches the launcher's PATH, which is the command's: the environment keeps it.
        ::execvpe(argv[0], argv.data(), envp.data());
        const int error = errno;
        [[maybe_unused]] const ssize_t written = ::write(report[1], &error, sizeof error);
        ::_exit(kNotFound);
    }
    ::close(report[1]);
    int error = 0;
    ssize_t got = 0;
    do
        got = ::read(report[0], &error, sizeof error);
    while (got < 0 && errno == EINTR);
    ::close(report[0]);
    if (got != static_cast<ssize_t>(sizeof error))
        return child;
    int ignored = 0;
    while (::waitpid(child, &ignored, 0) < 0 && errno == EINTR) {
    }
    throw exec_failure(command[0], error);
}

int exit_status_of(int wait_status) {
    if (WIFSIGNALED(wait_status))
        return 128 + WTERMSIG(wait_status);
    return WEXITSTATUS(wait_status);
}

} // namespace gpuleak::launcher
