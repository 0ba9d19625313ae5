#include "interpreter_probe.h"

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <fmt/format.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

#include "launcher_error.h"

extern char** environ;

namespace gpuleak::launcher {

namespace {

// One line each: sys.executable, sys.prefix, then whether ipykernel can be found (found without being
// imported: importing it takes a second and starts nothing we need).
constexpr const char* kProbe = "import sys, importlib.util\n"
                               "print(sys.executable)\n"
                               "print(sys.prefix)\n"
                               "print(int(sys.version_info[0] == 3 and "
                               "importlib.util.find_spec('ipykernel') is not None))\n";

std::string run_capturing(const std::string& python) {
    int output[2];
    if (::pipe2(output, O_CLOEXEC) != 0)
        throw LauncherError(fmt::format("--python {}: pipe: {}", python, std::strerror(errno)));
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, output[1], STDOUT_FILENO);
    std::vector<std::string> arguments{python, "-c", kProbe};
    std::vector<char*> argv;
    argv.reserve(arguments.size() + 1);
    for (std::string& argument : arguments)
        argv.push_back(argument.data());
    argv.push_back(nullptr);
    pid_t child = 0;
    const int error = ::posix_spawnp(&child, python.c_str(), &actions, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    ::close(output[1]);
    if (error != 0) {
        ::close(output[0]);
        throw LauncherError(
            fmt::format("--python {}: {}", python, error == ENOENT ? "not found" : std::strerror(error)));
    }
    std::string text;
    char buffer[4096];
    for (;;) {
        const ssize_t got = ::read(output[0], buffer, sizeof buffer);
        if (got > 0)
            text.append(buffer, static_cast<size_t>(got));
        else if (got == 0 || errno != EINTR)
            break;
    }
    ::close(output[0]);
    int status = 0;
    while (::waitpid(child, &status, 0) < 0 && errno == EINTR) {
    }
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
        throw LauncherError(fmt::format("--python {}: not a working Python 3 interpreter", python));
    return text;
}

} // namespace

Interpreter probe_interpreter(const std::string& python) {
    const std::string text = run_capturing(python);
    std::vector<std::string> lines;
    size_t start = 0;
    for (size_t end = text.find('\n'); end != std::string::npos; end = text.find('\n', start)) {
        lines.push_back(text.substr(start, end - start));
        start = end + 1;
    }
    if (lines.size() != 3 || lines[0].empty() || lines[0][0] != '/')
        throw LauncherError(fmt::format("--python {}: not a working Python 3 interpreter", python));
    return {lines[0], lines[1], lines[2] == "1"};
}

} // namespace gpuleak::launcher
