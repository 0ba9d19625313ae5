#include "traced_run.h"

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <poll.h>
#include <spawn.h>
#include <sstream>
#include <stdexcept>
#include <sys/wait.h>
#include <unistd.h>

extern char** environ;

bool TracedRun::exited_with(int code) const {
    return WIFEXITED(wait_status) && WEXITSTATUS(wait_status) == code;
}

bool TracedRun::killed_by(int signal) const {
    return WIFSIGNALED(wait_status) && WTERMSIG(wait_status) == signal;
}

std::vector<std::string> TracedRun::traces() const {
    std::vector<std::string> found;
    for (const auto& entry : std::filesystem::directory_iterator(directory))
        if (entry.path().filename().string().rfind("trace.", 0) == 0)
            found.push_back(entry.path().string());
    std::sort(found.begin(), found.end());
    return found;
}

std::string program_path(const std::string& name) {
    return std::string(GPULEAK_PROGRAMS_DIR) + "/" + name;
}
std::string library_path() {
    return GPULEAK_LIBRARY;
}
std::string simdevice_directory() {
    return GPULEAK_SIMDEVICE_DIR;
}

namespace {

std::vector<std::string> environment_for(const TempDir& directory, const RunOptions& options) {
    std::map<std::string, std::string> variables;
    for (char** entry = environ; *entry != nullptr; ++entry) {
        std::string text = *entry;
        size_t equals = text.find('=');
        if (equals != std::string::npos)
            variables[text.substr(0, equals)] = text.substr(equals + 1);
    }
    // The test runner's own settings must not leak into the program under test.
    for (auto it = variables.begin(); it != variables.end();)
        it = it->first.rfind("GPULEAK_", 0) == 0 ? variables.erase(it) : std::next(it);
    if (options.preload)
        variables["LD_PRELOAD"] = library_path();
    else
        variables.erase("LD_PRELOAD");
    variables["LD_LIBRARY_PATH"] = simdevice_directory();
    variables["GPULEAK_OUTPUT"] = std::filesystem::path(directory.path()) / "trace.%p";
    // Built as a std::string: GCC 12 reports a false -Wrestrict on assigning the literal here.
    variables["GPULEAK_SIM_QUIET"] = std::string(1, '1');
    for (const std::string& entry : options.environment) {
        size_t equals = entry.find('=');
        variables[entry.substr(0, equals)] = equals == std::string::npos ? "" : entry.substr(equals + 1);
    }
    for (const std::string& name : options.unset)
        variables.erase(name);
    std::vector<std::string> result;
    for (const auto& [name, value] : variables)
        result.push_back(name + "=" + value);
    return result;
}

void drain(int fd, std::string& into, bool& open) {
    char buffer[65536];
    ssize_t n = ::read(fd, buffer, sizeof buffer);
    if (n > 0)
        into.append(buffer, static_cast<size_t>(n));
    else if (n == 0 || (errno != EINTR && errno != EAGAIN))
        open = false;
}

} // namespace

TracedRun run_traced(const TempDir& directory, const std::string& program,
                     const std::vector<std::string>& arguments, const RunOptions& options) {
    TracedRun run;
    run.directory = directory.path();
    std::vector<std::string> environment = environment_for(directory, options);
    std::vector<char*> env_pointers;
    for (std::string& entry : environment)
        env_pointers.push_back(entry.data());
    env_pointers.push_back(nullptr);
    std::vector<std::string> argv_strings{program};
    argv_strings.insert(argv_strings.end(), arguments.begin(), arguments.end());
    std::vector<char*> argv;
    for (std::string& argument : argv_strings)
        argv.push_back(argument.data());
    argv.push_back(nullptr);

    int out_pipe[2];
    int err_pipe[2];
    if (pipe(out_pipe) != 0 || pipe(err_pipe) != 0)
        throw std::runtime_error("pipe failed");
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, out_pipe[1], STDOUT_FILENO);
    posix_spawn_file_actions_adddup2(&actions, err_pipe[1], STDERR_FILENO);
    posix_spawn_file_actions_addclose(&actions, out_pipe[0]);
    posix_spawn_file_actions_addclose(&actions, err_pipe[0]);
    const std::string cwd = options.working_directory.empty() ? directory.path() : options.working_directory;
    posix_spawn_file_actions_addchdir_np(&actions, cwd.c_str());
    pid_t child = 0;
    int spawned = posix_spawn(&child, program.c_str(), &actions, nullptr, argv.data(), env_pointers.data());
    posix_spawn_file_actions_destroy(&actions);
    ::close(out_pipe[1]);
    ::close(err_pipe[1]);
    if (spawned != 0)
        throw std::runtime_error("cannot start " + program + ": " + std::strerror(spawned));

    const auto started = std::chrono::steady_clock::now();
    bool out_open = true;
    bool err_open = true;
    bool killed = false;
    bool signalled = false;
    while (out_open || err_open) {
        pollfd fds[2] = {{out_pipe[0], POLLIN, 0}, {err_pipe[0], POLLIN, 0}};
        int timeout = -1;
        if (options.kill_after && !killed) {
            auto left = *options.kill_after - std::chrono::duration_cast<std::chrono::milliseconds>(
                                                  std::chrono::steady_clock::now() - started);
            timeout = static_cast<int>(std::max<int64_t>(0, left.count()));
        }
        int ready = poll(fds, 2, timeout);
        if (ready == 0 && options.kill_after && !killed) {
            ::kill(child, SIGKILL);
            killed = true;
            continue;
        }
        if (out_open && (fds[0].revents & (POLLIN | POLLHUP)) != 0)
            drain(out_pipe[0], run.out, out_open);
        if (options.signal_on_output && !signalled &&
            run.out.find(options.signal_on_output->text) != std::string::npos) {
            ::kill(child, options.signal_on_output->signal);
            signalled = true;
        }
        if (err_open && (fds[1].revents & (POLLIN | POLLHUP)) != 0)
            drain(err_pipe[0], run.err, err_open);
    }
    ::close(out_pipe[0]);
    ::close(err_pipe[0]);
    while (waitpid(child, &run.wait_status, 0) < 0 && errno == EINTR) {
    }
    return run;
}

std::string read_text(const std::string& path) {
    std::ifstream file(path);
    std::stringstream text;
    text << file.rdbuf();
    return text.str();
}
