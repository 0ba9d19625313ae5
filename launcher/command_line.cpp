#include "launcher/command_line.h"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <fmt/format.h>
#include <iostream>

#include "gpuleak/config_limits.h"
#include "launcher/launcher_error.h"

namespace gpuleak::launcher {

namespace {

constexpr const char* kRunUsage = "gpuleak run [options] -- command args...";
constexpr const char* kKernelUsage = "gpuleak kernel install|list|uninstall NAME";
// A kernel's traces go to its state directory (kernel_session.cpp): `kernel run` has no --output.
void add_run_options(CLI::App& run, RunRequest& request, bool with_output_directory) {
    if (with_output_directory)
        run.add_option(
            "-o,--output", request.output_directory,
            "directory for the traces and the report (created if missing, must be empty); default: "
            "a new gpuleak-<command>-<date>-<time> in the current directory");
    run.add_option("--max-mb", request.max_mb, "size of each trace file in MiB (GPULEAK_MAX_MB)")
        ->check(CLI::Range(kMinMaxMb, kMaxMaxMb));
    run.add_option("--stack-depth", request.stack_depth,
                   "native frames kept per stack, and as many Python frames; 0: no stacks "
                   "(GPULEAK_STACK_DEPTH)")
        ->check(CLI::Range(uint32_t{0}, kMaxStackDepthSetting));
    run.add_option("--sample-ms", request.sample_ms,
                   "initial timeline sampling interval in ms (GPULEAK_SAMPLE_MS)")
        ->check(CLI::Range(kMinSampleMs, kMaxSampleMs));
    run.add_flag("--no-python", request.no_python, "no Python frames in the stacks (GPULEAK_PYTHON=0)");
    run.add_flag("--quiet", request.quiet,
                 "no line on stderr from each traced process naming its trace (GPULEAK_QUIET=1), nor the one "
                 "announcing a build of the PyTorch adapter; the summary at the end is still printed");
}

void add_kernel_subcommands(CLI::App& kernel, Invocation& invocation) {
    kernel.require_subcommand(1);
    CLI::App* install = kernel.add_subcommand(
        "install", "install a Jupyter kernelspec that runs ipykernel under gpuleak (\"Python 3 (gpuleak)\")");
    KernelInstallRequest& request = invocation.install;
    CLI::Option* user = install->add_flag("--user")->description("into the user's Jupyter data directory");
    CLI::Option* sys_prefix =
        install->add_flag("--sys-prefix")->description("into the --python interpreter's sys.prefix");
    CLI::Option* prefix = install->add_option("--prefix", request.prefix, "into PREFIX/share/jupyter");
    user->excludes(sys_prefix)->excludes(prefix);
    sys_prefix->excludes(prefix);
    install->add_option("--name", request.name, "the kernelspec's name")->capture_default_str();
    install->add_option("--display-name", request.display_name, "the name Jupyter shows")
        ->capture_default_str();
    install->add_option("--python", request.python, "the interpreter that runs ipykernel")
        ->capture_default_str();
    install->add_flag("--replace", request.replace, "replace a kernelspec of that name");
    install->callback([&request, user, sys_prefix, prefix] {
        request.place = user->count() > 0         ? SpecPlace::User
                        : sys_prefix->count() > 0 ? SpecPlace::SysPrefix
                        : prefix->count() > 0     ? SpecPlace::Prefix
                                                  : SpecPlace::System;
    });
    CLI::App* list = kernel.add_subcommand("list", "list the gpuleak kernelspecs Jupyter finds");
    list->add_option("--python", invocation.python, "search this interpreter's sys.prefix too");
    CLI::App* uninstall = kernel.add_subcommand("uninstall", "remove the gpuleak kernelspecs of this name");
    uninstall->add_option("name", invocation.kernel_name, "the kernelspec's name")->required();
    uninstall->add_option("--python", invocation.python, "search this interpreter's sys.prefix too");
    CLI::App* run = kernel.add_subcommand(
        "run",
        "run a Jupyter kernel under gpuleak (what a gpuleak kernelspec starts): kernel run -- python -m "
        "ipykernel_launcher -f {connection_file}");
    add_run_options(*run, invocation.run, false);
}

// Where the command starts among the arguments after "run": after "--", or at the first argument that is
// neither an option of run's nor the value of one, so that `gpuleak run python train.py --lr 1` leaves
// --lr to the command. CLI11 (2.1) cannot be told this: its prefix mode still takes later options that
// match run's own, and rejects arguments after "--" when no positional is declared.
size_t command_start(const CLI::App& run, const std::vector<std::string>& arguments) {
    size_t i = 0;
    while (i < arguments.size()) {
        const std::string& argument = arguments[i];
        if (argument == "--" || argument.size() < 2 || argument[0] != '-')
            return i;
        const bool long_form = argument.rfind("--", 0) == 0;
        const std::string name = argument.substr(0, long_form ? argument.find('=') : 2);
        const CLI::Option* option = run.get_option_no_throw(name);
        // "--output=DIR" and "-oDIR" carry their value; an unknown option is left to CLI11 to reject.
        const bool value_attached = argument.size() > name.size();
        const bool takes_value = option != nullptr && option->get_expected_min() > 0;
        i += takes_value && !value_attached ? 2 : 1;
    }
    return arguments.size();
}

} // namespace

Invocation parse_command_line(const std::vector<std::string>& arguments) {
    CLI::App app{"gpuleak: finds GPU memory leaks; runs a command with its CUDA allocations recorded"};
    app.name("gpuleak");
    app.require_subcommand(1);
    CLI::App* run = app.add_subcommand(
        "run", fmt::format("run a command with every process it starts recorded, then report on the run: {}",
                           kRunUsage));
    Invocation invocation;
    add_run_options(*run, invocation.run, true);
    CLI::App* kernel =
        app.add_subcommand("kernel", fmt::format("Jupyter kernels under gpuleak: {}", kKernelUsage));
    add_kernel_subcommands(*kernel, invocation);
    CLI::App* kernel_run = kernel->get_subcommand("run");
    CLI::App* torch_adapter = app.add_subcommand(
        "torch-adapter",
        "build the PyTorch adapter (per-tensor records) for the torch that --python imports, "
        "unless built already, and print its path; gpuleak run and kernel run do so themselves "
        "for a Python command");
    torch_adapter->add_option("--python", invocation.python, "the interpreter that imports torch")
        ->default_val("python3")
        ->capture_default_str();
    CLI::App* watch = app.add_subcommand(
        "watch", "show a running traced program's memory live, refreshed as it runs, until it ends: each "
                 "device's memory now and lately, the sites growing now, failures");
    watch
        ->add_option("target", invocation.watch.target,
                     "a pid (a process started under gpuleak run), a run's directory or a trace")
        ->required();
    watch->add_flag("--once", invocation.watch.once, "print one frame and exit");
    watch->add_option("--interval", invocation.watch.interval, "seconds between frames")
        ->check(CLI::Range(0.1, 3600.0))
        ->capture_default_str();
    CLI::App* attach = app.add_subcommand(
        "attach", "record a running Python program that was not started under gpuleak, from now until "
                  "--duration has passed, Ctrl-C or its end, then report as gpuleak run does (uses gdb)");
    attach->add_option("pid", invocation.attach.pid, "the program's process id")->required();
    attach->add_option("--duration", invocation.attach.duration, "seconds to record")
        ->check(CLI::Range(0.1, 31.0 * 24 * 3600));
    attach->add_option("-o,--output", invocation.attach.output_directory,
                       "the directory for the trace and the report (made if missing; must be empty)");

    if (arguments.empty())
        throw LauncherError(
            fmt::format("no subcommand; usage: {} or {} (gpuleak --help for more)", kRunUsage, kKernelUsage));
    std::vector<std::string> own = arguments;
    // `run` and `kernel run` end their own arguments where the command starts.
    const size_t own_words = arguments[0] == "run"                                                       ? 1
                             : arguments.size() > 1 && arguments[0] == "kernel" && arguments[1] == "run" ? 2
                                                                                                         : 0;
    if (own_words > 0) {
        std::vector<std::string> after(arguments.begin() + static_cast<std::ptrdiff_t>(own_words),
                                       arguments.end());
        const size_t start = command_start(own_words == 1 ? *run : *kernel_run, after);
        own.assign(arguments.begin(), arguments.begin() + static_cast<std::ptrdiff_t>(own_words + start));
        auto command = after.begin() + static_cast<std::ptrdiff_t>(start);
        if (command != after.end() && *command == "--")
            ++command;
        invocation.run.command.assign(command, after.end());
    }
    // CLI11 takes the arguments as a vector in reverse order.
    std::reverse(own.begin(), own.end());
    try {
        app.parse(own);
    } catch (const CLI::CallForHelp&) {
        std::cout << app.help();
        return {};
    } catch (const CLI::ParseError& error) {
        throw LauncherError(error.what());
    }
    if (run->parsed()) {
        if (invocation.run.command.empty())
            throw LauncherError(fmt::format("run: no command given; usage: {}", kRunUsage));
        invocation.subcommand = Subcommand::Run;
    } else if (kernel_run->parsed()) {
        if (invocation.run.command.empty())
            throw LauncherError("kernel run: no kernel command given");
        invocation.subcommand = Subcommand::KernelRun;
    } else if (kernel->get_subcommand("install")->parsed()) {
        invocation.subcommand = Subcommand::KernelInstall;
    } else if (kernel->get_subcommand("list")->parsed()) {
        invocation.subcommand = Subcommand::KernelList;
    } else if (kernel->get_subcommand("uninstall")->parsed()) {
        invocation.subcommand = Subcommand::KernelUninstall;
    } else if (torch_adapter->parsed()) {
        invocation.subcommand = Subcommand::TorchAdapter;
    } else if (watch->parsed()) {
        invocation.subcommand = Subcommand::Watch;
    } else if (attach->parsed()) {
        invocation.subcommand = Subcommand::Attach;
    }
    return invocation;
}

} // namespace gpuleak::launcher
