// gpuleak's command line: a subcommand and its options. `gpuleak run [options] -- command args...`.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "launcher/attach_command.h"
#include "launcher/kernelspec.h"
#include "launcher/watch_command.h"

namespace gpuleak::launcher {

// What `gpuleak run` was asked to do. The recorder settings are absent when not given: the command then
// gets whatever GPULEAK_* the environment already holds.
struct RunRequest {
    std::vector<std::string> command;
    std::string output_directory; // empty: a fresh one under the current directory
    std::optional<uint64_t> max_mb;
    std::optional<uint32_t> stack_depth;
    std::optional<uint32_t> sample_ms;
    bool no_python = false;
    bool quiet = false;
};

enum class Subcommand {
    None, // help was asked for and printed
    Run,
    KernelRun, // run.command is the kernel's command
    KernelInstall,
    KernelList,
    KernelUninstall,
    TorchAdapter,
    Watch,
    Attach,
};

struct Invocation {
    Subcommand subcommand = Subcommand::None;
    RunRequest run;
    KernelInstallRequest install;
    WatchRequest watch;
    AttachRequest attach;
    std::string kernel_name; // kernel uninstall
    std::string python;      // kernel list: whose sys.prefix is searched too; torch-adapter: whose torch
};

// `arguments` without the program's name. Throws LauncherError (one line) for a usage error; prints
// help on stdout when asked for it.
Invocation parse_command_line(const std::vector<std::string>& arguments);

} // namespace gpuleak::launcher
