// The PyTorch adapter, built at first use: before a Python command starts, the launcher makes sure the
// adapter for the torch that interpreter imports is in the cache where libgpuleak.so looks for it
// (include/gpuleak/torch_adapter_path.h), building it there with the installed
// share/gpuleak/torch_adapter/build-adapter.sh when it is not. The traced program never waits for a
// compiler, and a build that fails leaves its log where libgpuleak.so's one warning names it.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace gpuleak::launcher {

// The Python interpreter `command` runs, if it runs one: `python3 train.py`, `/venv/bin/python -m x`,
// or a program whose #! line names one, directly or through env (torchrun, accelerate, ./train.py).
// Nothing for anything else (`bash train.sh`): the adapter is then left to `gpuleak torch-adapter`.
std::optional<std::string> python_of_command(const std::vector<std::string>& command);

// One torch install with CUDA, as the adapter's cache names it.
struct TorchInstall {
    std::string directory; // the torch package's directory
    std::string version;   // torch.__version__, from torch/version.py
    std::string build_id;  // torch/lib/libc10_cuda.so's GNU build id, in hex
};

// The torch `python` would import, found without importing it; nothing when it finds none, or one
// without CUDA (no lib/libc10_cuda.so), which has nothing to adapt. Throws LauncherError (one line) when
// the torch found cannot be identified.
std::optional<TorchInstall> torch_of(const std::string& python);

struct AdapterBuild {
    std::string library; // where libgpuleak.so looks for the adapter
    std::string log;     // what a failed build printed
    bool built = false;  // the library is there, built now or before
    std::string failure; // why not: the build's last line
};

// The adapter for `torch`: found in the cache, else built with `python` (one build at a time per torch
// install, also across launchers; those that waited for one that failed take its failure). `announce`:
// a line on stderr before a build starts.
AdapterBuild ensure_torch_adapter(const std::string& python, const TorchInstall& torch, bool announce);

// Before a command starts: the adapter for the torch `python` (the command's interpreter, if any)
// imports, when it imports one, unless GPULEAK_TORCH=0 or `library` (the libgpuleak.so to preload) is
// another build's, which looks for an adapter of its own source. Nothing when nothing was to be done.
// Never throws: without an adapter the run records PyTorch's memory per segment, and libgpuleak.so
// warns.
std::optional<AdapterBuild> prepare_torch_adapter(const std::optional<std::string>& python,
                                                  const std::string& library, bool announce);

// `gpuleak torch-adapter --python PYTHON`: builds the adapter when missing and prints its path on stdout.
// Throws LauncherError (one line) when there is nothing to build for or the build failed.
int torch_adapter_command(const std::string& python);

} // namespace gpuleak::launcher
