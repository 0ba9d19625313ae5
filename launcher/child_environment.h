// The command's environment: the launcher's own, with libgpuleak.so preloaded, GPULEAK_OUTPUT naming a
// trace per process in the run's directory, and the recorder settings given as options. Every process
// the command starts inherits it: forked workers, exec'd children, multiprocessing's spawned
// interpreters, torchrun's ranks.
#pragma once

#include <string>
#include <vector>

#include "launcher/command_line.h"

namespace gpuleak::launcher {

// The launcher's own environment, KEY=VALUE entries in their order.
std::vector<std::string> process_environment();

// Sets `name` to `value` in `environment`, where it was, or at the end.
void set_variable(std::vector<std::string>& environment, const std::string& name, const std::string& value);
void unset_variable(std::vector<std::string>& environment, const std::string& name);

// The value of `name` in `environment`; empty when it is not there.
std::string variable(const std::vector<std::string>& environment, const std::string& name);

// GPULEAK_OUTPUT for traces in `directory`: gpuleak.<pid>.trace, gpuleak.rank<N>.<pid>.trace in a process
// that has RANK or LOCAL_RANK set. Throws LauncherError when the recorder could not hold the pattern.
std::string output_pattern(const std::string& directory);

// `current` (KEY=VALUE entries, in their order) with LD_PRELOAD, GPULEAK_OUTPUT, the settings `request`
// gives and GPULEAK_PYTHON_PACKAGE (where the library imports the Python package from at an out-of-memory
// error, when the program has not installed it; left as it was when `python_package` is empty) replaced
// or appended; everything else as it was.
std::vector<std::string> child_environment(const std::vector<std::string>& current,
                                           const std::string& library, const std::string& pattern,
                                           const RunRequest& request, const std::string& python_package);

} // namespace gpuleak::launcher
