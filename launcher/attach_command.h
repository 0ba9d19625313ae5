// `gpuleak attach PID`: records a Python program that is already running and was not started under
// gpuleak, from now until --duration has passed, gpuleak attach is interrupted or the program ends, then
// writes the report as gpuleak run does. gdb loads libgpuleak.so into the program (attach_gdb.py) and
// later tells it to stop; the program goes on as it was, its output and its exit status its own.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace gpuleak::launcher {

struct AttachRequest {
    int32_t pid = 0;
    std::optional<double> duration; // seconds; none: until interrupted or the program ends
    std::string output_directory;   // empty: a fresh one under the current directory
};

// The CPython 3 minor versions whose interpreter gpuleak reads (python/python_layout.h).
inline constexpr int kOldestPythonMinor = 10;
inline constexpr int kNewestPythonMinor = 13;

// 0 once the report is written; 2 with one line on stderr for a process that cannot be attached to (gone,
// another user's, not Python or a Python out of range, recorded already, ptrace not permitted, no gdb).
int attach_command(const AttachRequest& request);

} // namespace gpuleak::launcher
