// Runs a test program under LD_PRELOAD=libgpuleak.so on the simulated device and collects what it
// left: exit status, stdout, stderr and the trace files it wrote.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "temp_dir.h"

struct RunOptions {
    bool preload = true;                  // false: the same program without gpuleak
    std::vector<std::string> environment; // extra KEY=VALUE entries (override the defaults below)
    std::vector<std::string> unset;       // variables removed afterwards (an empty value is not unset)
    std::optional<std::chrono::milliseconds> kill_after; // then SIGKILL the program
    std::string working_directory;                       // default: the run's trace directory
    // Once the program's stdout holds `text`, `signal` is sent to it (to the program started, not its group).
    struct SignalOnOutput {
        std::string text;
        int signal = 0;
    };
    std::optional<SignalOnOutput> signal_on_output;
};

struct TracedRun {
    int wait_status = 0; // as waitpid reports it
    std::string out;
    std::string err;
    std::string directory; // GPULEAK_OUTPUT is <directory>/trace.%p unless overridden

    [[nodiscard]] bool exited_with(int code) const;
    [[nodiscard]] bool killed_by(int signal) const;
    // Every trace file in the directory, sorted.
    [[nodiscard]] std::vector<std::string> traces() const;
};

// The absolute path of a test program built in tests/programs.
std::string program_path(const std::string& name);
std::string library_path();
std::string simdevice_directory();
// The whole of a text file; empty when it cannot be read.
std::string read_text(const std::string& path);

// Runs `program` with `arguments`; the environment is this process's plus LD_PRELOAD (when asked),
// LD_LIBRARY_PATH=<simdevice>, GPULEAK_OUTPUT=<dir>/trace.%p, GPULEAK_SIM_QUIET=1, then `options`
// (`environment` entries, then `unset`).
// The run's directory lives as long as `directory` does.
TracedRun run_traced(const TempDir& directory, const std::string& program,
                     const std::vector<std::string>& arguments, const RunOptions& options = {});
