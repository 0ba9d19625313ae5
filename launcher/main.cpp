// gpuleak: the launcher. `gpuleak run -- python train.py` records the GPU memory of a command and of
// every process it starts, then reports on the run; `gpuleak kernel ...` does the same for Jupyter
// kernels.
#include <cstdio>
#include <fmt/format.h>
#include <string>
#include <vector>

#include "launcher/attach_command.h"
#include "launcher/command_line.h"
#include "launcher/kernel_commands.h"
#include "launcher/kernel_session.h"
#include "launcher/launcher_error.h"
#include "launcher/run_command.h"
#include "launcher/say.h"
#include "launcher/torch_adapter.h"
#include "launcher/watch_command.h"

int main(int argc, char** argv) {
    using namespace gpuleak::launcher;
    try {
        const Invocation invocation = parse_command_line(std::vector<std::string>(argv + 1, argv + argc));
        switch (invocation.subcommand) {
        case Subcommand::Run:
            return run_command(invocation.run);
        case Subcommand::KernelRun:
            return run_kernel(invocation.run);
        case Subcommand::KernelInstall:
            return kernel_install(invocation.install);
        case Subcommand::KernelList:
            return kernel_list(invocation.python);
        case Subcommand::KernelUninstall:
            return kernel_uninstall(invocation.kernel_name, invocation.python);
        case Subcommand::TorchAdapter:
            return torch_adapter_command(invocation.python);
        case Subcommand::Watch:
            return watch_command(invocation.watch);
        case Subcommand::Attach:
            return attach_command(invocation.attach);
        case Subcommand::None:
            break;
        }
        return 0;
    } catch (const LauncherError& error) {
        say(error.what());
        return error.exit_status();
    } catch (const std::exception& error) {
        // A bug or exhaustion, before the command ran or while it did: still one line.
        say(fmt::format("internal error: {}", error.what()));
        return kLauncherFailed;
    }
}
