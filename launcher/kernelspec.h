// Jupyter kernelspecs that run ipykernel under `gpuleak kernel run`: where they go (jupyter_core's
// directories), installing, finding and removing them. `gpuleak kernel install|list|uninstall`.
#pragma once

#include <string>
#include <vector>

namespace gpuleak::launcher {

enum class SpecPlace { System, User, SysPrefix, Prefix };

struct KernelInstallRequest {
    SpecPlace place = SpecPlace::System;
    std::string prefix; // SpecPlace::Prefix
    std::string name = "gpuleak";
    std::string display_name = "Python 3 (gpuleak)";
    std::string python = "python3";
    bool replace = false;
};

// Jupyter's data directory for `place` (the kernelspec goes into its kernels/<name>/): --user:
// $JUPYTER_DATA_DIR, else $XDG_DATA_HOME/jupyter, else ~/.local/share/jupyter; --sys-prefix:
// <sys.prefix>/share/jupyter of the interpreter; --prefix P: P/share/jupyter; else /usr/local/share/jupyter.
std::string data_directory(SpecPlace place, const std::string& prefix, const std::string& sys_prefix);

// The kernel.json text: ipykernel under `launcher` in kernel mode, with the gpuleak IPython extension.
std::string kernel_json(const std::string& launcher, const std::string& python,
                        const std::string& display_name);

// Writes the kernelspec and returns its directory. Throws LauncherError (one line): no such interpreter,
// one without ipykernel, a bad name, a spec of that name there already without `replace`.
std::string install_kernelspec(const KernelInstallRequest& request);

struct FoundSpec {
    std::string name;
    std::string display_name;
    std::string directory;
};

// The kernelspec directories Jupyter searches, first first: each of $JUPYTER_PATH's, the user's data
// directory, `sys_prefix`/share/jupyter when given, /usr/local/share/jupyter and /usr/share/jupyter; each
// with kernels/ appended.
std::vector<std::string> kernelspec_search_path(const std::string& sys_prefix);

// The gpuleak kernelspecs (those whose argv runs `gpuleak kernel run`) in `search_path`, by directory.
std::vector<FoundSpec> find_gpuleak_kernelspecs(const std::vector<std::string>& search_path);

} // namespace gpuleak::launcher
