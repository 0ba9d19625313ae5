// What a Python interpreter that a kernelspec is to run says about itself: where it is, its sys.prefix,
// and whether it can import ipykernel. Asked by running it, once, when a kernelspec is installed.
#pragma once

#include <string>

namespace gpuleak::launcher {

struct Interpreter {
    std::string executable; // sys.executable: absolute, as the kernelspec names it
    std::string prefix;     // sys.prefix
    bool has_ipykernel = false;
};

// Runs `python` (a path, or a name looked up in PATH). Throws LauncherError (one line) when it cannot be
// run or does not answer as a Python 3 interpreter.
Interpreter probe_interpreter(const std::string& python);

} // namespace gpuleak::launcher
