#include "launcher/kernel_commands.h"

#include <filesystem>
#include <fmt/format.h>

#include "launcher/interpreter_probe.h"
#include "launcher/launcher_error.h"
#include "launcher/preload_library.h"
#include "launcher/say.h"
#include "launcher/torch_adapter.h"

namespace gpuleak::launcher {

namespace fs = std::filesystem;

namespace {

// The interpreter's sys.prefix for the search, or nothing: without a Python, the other directories are
// still searched, as Jupyter would.
std::string sys_prefix_of(const std::string& python) {
    try {
        return probe_interpreter(python.empty() ? "python3" : python).prefix;
    } catch (const LauncherError&) {
        if (!python.empty())
            throw;
        return {};
    }
}

} // namespace

int kernel_install(const KernelInstallRequest& request) {
    const std::string directory = install_kernelspec(request);
    fmt::print("installed kernelspec {} (\"{}\") in {}\n", request.name, request.display_name, directory);
    // Now rather than at the kernel's start, which Jupyter waits on; a failure is said here, where the
    // user is, not in the Jupyter server's log.
    try {
        const std::optional<AdapterBuild> adapter =
            prepare_torch_adapter(request.python, find_preload_library(), true);
        if (adapter && !adapter->built)
            say(fmt::format(
                "the PyTorch adapter could not be built ({}; the build's output: {}): the kernel will "
                "record PyTorch's memory per segment, not per tensor, until one of its starts builds it",
                adapter->failure, adapter->log));
    } catch (const LauncherError&) {
        // No libgpuleak.so: the kernel's start says so.
    }
    return 0;
}

int kernel_list(const std::string& python) {
    for (const FoundSpec& spec : find_gpuleak_kernelspecs(kernelspec_search_path(sys_prefix_of(python))))
        fmt::print("{}  \"{}\"  {}\n", spec.name, spec.display_name, spec.directory);
    return 0;
}

int kernel_uninstall(const std::string& name, const std::string& python) {
    int removed = 0;
    for (const FoundSpec& spec : find_gpuleak_kernelspecs(kernelspec_search_path(sys_prefix_of(python)))) {
        if (spec.name != name)
            continue;
        std::error_code error;
        fs::remove_all(spec.directory, error);
        if (error)
            throw LauncherError(fmt::format("cannot remove {}: {}", spec.directory, error.message()));
        fmt::print("removed {}\n", spec.directory);
        ++removed;
    }
    if (removed == 0)
        throw LauncherError(
            fmt::format("kernel uninstall: no gpuleak kernelspec named {} (gpuleak kernel list "
                        "shows them)",
                        name));
    return 0;
}

} // namespace gpuleak::launcher
