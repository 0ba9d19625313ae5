#include "captured_run.h"

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <fmt/format.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include "launcher_error.h"

extern char** environ;

namespace gpuleak::launcher {

CapturedRun run_captured(const std::vector<std::string>& arguments,
                         const std::optional<std::string>& stderr_file) {
    const std::string& program = arguments.at(0);
    int output[2];
    if (::pipe2(output, O_CLOEXEC) != 0)
        throw LauncherError(fmt::format("{}: pipe: {}", program, std::strerror(errno)));
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_adddup2(&actions, output[1], STDOUT_FILENO);
    if (stderr_file)
        posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, stderr_file->c_str(),
                                         O_WRONLY | O_CREAT | O_TRUNC, 0644);
    std::vector<char*> argv;
    argv.reserve(arguments.size() + 1);
    for (const std::string& argument : arguments)
        argv.push_back(const_cast<char*>(argument.c_str()));
    argv.push_back(nullptr);
    pid_t child = 0;
    const int error = ::posix_spawnp(&child, program.c_str(), &actions, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    ::close(output[1]);
    if (error != 0) {
        ::close(output[0]);
        throw LauncherError(
            fmt::format("{}: {}", program, error == ENOENT ? "not found" : std::strerror(error)));
    }
    CapturedRun run;
    char buffer[4096];
    for (;;) {
        const ssize_t got = ::read(output[0], buffer, sizeof buffer);
        if (got > 0)
            run.output.append(buffer, static_cast<size_t>(got));
        else if (got == 0 || errno != EINTR)
            break;
    }
    ::close(output[0]);
    int status = 0;
    while (::waitpid(child, &status, 0) < 0 && errno == EINTR) {
    }
    run.exited = WIFEXITED(status);
    run.exit_status = run.exited ? WEXITSTATUS(status) : 0;
    return run;
}

} // namespace gpuleak::launcher
