// Running a helper program to completion and reading what it printed: the interpreter probes and the
// PyTorch adapter's build, which run before the command does, with the launcher's environment.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <vector>

namespace gpuleak::launcher {

struct CapturedRun {
    bool exited = false;    // false: killed by a signal
    bool timed_out = false; // killed, with everything it started, at the deadline
    int exit_status = 0;
    std::string output; // its stdout

    [[nodiscard]] bool succeeded() const { return exited && exit_status == 0; }
};

// Runs `arguments` (the first one looked up in PATH when it has no slash) in a process group of its
// own, with its stdin from /dev/null, its stdout captured and its stderr into `stderr_file` (created or
// truncated; /dev/null discards it) or, without one, the launcher's. A program still running after
// `limit` is killed with all it started. Throws LauncherError (one line, naming the program) when it
// cannot be started.
// `name` as execvp finds it: itself when it holds a slash, else the first executable of that name in
// PATH; nothing where there is none.
std::optional<std::string> find_program(const std::string& name);

CapturedRun run_captured(const std::vector<std::string>& arguments,
                         const std::optional<std::string>& stderr_file = std::nullopt,
                         std::chrono::seconds limit = std::chrono::seconds(60));

} // namespace gpuleak::launcher
