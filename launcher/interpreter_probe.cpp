#include "launcher/interpreter_probe.h"

#include <fmt/format.h>
#include <vector>

#include "launcher/captured_run.h"
#include "launcher/launcher_error.h"

namespace gpuleak::launcher {

namespace {

// One line each: sys.executable, sys.prefix, then whether ipykernel can be found (found without being
// imported: importing it takes a second and starts nothing we need).
constexpr const char* kProbe = "import sys, importlib.util\n"
                               "print(sys.executable)\n"
                               "print(sys.prefix)\n"
                               "print(int(sys.version_info[0] == 3 and "
                               "importlib.util.find_spec('ipykernel') is not None))\n";

} // namespace

Interpreter probe_interpreter(const std::string& python) {
    CapturedRun run;
    try {
        run = run_captured({python, "-c", kProbe});
    } catch (const LauncherError& error) {
        throw LauncherError(fmt::format("--python {}", error.what()));
    }
    if (!run.succeeded())
        throw LauncherError(fmt::format("--python {}: not a working Python 3 interpreter", python));
    const std::string& text = run.output;
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
