#include "launcher/captured_run.h"

#include <cerrno>
#include <csignal>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <fmt/format.h>
#include <poll.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include "launcher/launcher_error.h"

extern char** environ;

namespace gpuleak::launcher {

namespace fs = std::filesystem;

namespace {

// Reads `fd` to its end, or until `deadline`: false when the deadline came first.
bool read_until(int fd, std::chrono::steady_clock::time_point deadline, std::string& text) {
    char buffer[4096];
    for (;;) {
        const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
            deadline - std::chrono::steady_clock::now());
        if (left.count() <= 0)
            return false;
        pollfd ready{fd, POLLIN, 0};
        const int polled = ::poll(&ready, 1, static_cast<int>(std::min<int64_t>(left.count(), 1000)));
        if (polled < 0 && errno != EINTR)
            return true;
        if (polled <= 0)
            continue;
        const ssize_t got = ::read(fd, buffer, sizeof buffer);
        if (got > 0)
            text.append(buffer, static_cast<size_t>(got));
        else if (got == 0 || errno != EINTR)
            return true;
    }
}

} // namespace

std::optional<std::string> find_program(const std::string& name) {
    if (name.find('/') != std::string::npos)
        return name;
    const char* path = std::getenv("PATH");
    const std::string directories = path != nullptr ? path : "/bin:/usr/bin";
    size_t start = 0;
    while (start <= directories.size()) {
        size_t end = directories.find(':', start);
        if (end == std::string::npos)
            end = directories.size();
        const std::string directory = end > start ? directories.substr(start, end - start) : ".";
        const std::string candidate = (fs::path(directory) / name).string();
        std::error_code error;
        if (fs::is_regular_file(candidate, error) && ::access(candidate.c_str(), X_OK) == 0)
            return candidate;
        start = end + 1;
    }
    return std::nullopt;
}

CapturedRun run_captured(const std::vector<std::string>& arguments,
                         const std::optional<std::string>& stderr_file, std::chrono::seconds limit) {
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
    // A group of its own: a compiler it started goes with it at the deadline, and a Ctrl-C at the
    // terminal is the launcher's to handle, not a half-written adapter's.
    posix_spawnattr_t attributes;
    posix_spawnattr_init(&attributes);
    posix_spawnattr_setflags(&attributes, POSIX_SPAWN_SETPGROUP);
    posix_spawnattr_setpgroup(&attributes, 0);
    std::vector<char*> argv;
    argv.reserve(arguments.size() + 1);
    for (const std::string& argument : arguments)
        argv.push_back(const_cast<char*>(argument.c_str()));
    argv.push_back(nullptr);
    pid_t child = 0;
    const int error = ::posix_spawnp(&child, program.c_str(), &actions, &attributes, argv.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    posix_spawnattr_destroy(&attributes);
    ::close(output[1]);
    if (error != 0) {
        ::close(output[0]);
        throw LauncherError(
            fmt::format("{}: {}", program, error == ENOENT ? "not found" : std::strerror(error)));
    }
    CapturedRun run;
    if (!read_until(output[0], std::chrono::steady_clock::now() + limit, run.output)) {
        ::kill(-child, SIGKILL);
        run.timed_out = true;
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
