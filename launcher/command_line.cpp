#include "command_line.h"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <fmt/format.h>
#include <iostream>

#include "config.h"
#include "launcher_error.h"

namespace gpuleak::launcher {

namespace {

constexpr const char* kRunUsage = "gpuleak run [options] -- command args...";

void add_run_options(CLI::App& run, RunRequest& request) {
    run.add_option("-o,--output", request.output_directory,
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
                 "no line on stderr from each traced process naming its trace (GPULEAK_QUIET=1); the "
                 "summary at the end is still printed");
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
    // Room for the `kernel` subcommands of the Jupyter kernel (issue #5), beside run.
    CLI::App app{"gpuleak: finds GPU memory leaks; runs a command with its CUDA allocations recorded"};
    app.name("gpuleak");
    app.require_subcommand(1);
    CLI::App* run = app.add_subcommand(
        "run", fmt::format("run a command with every process it starts recorded, then report on the run: {}",
                           kRunUsage));
    Invocation invocation;
    add_run_options(*run, invocation.run);

    if (arguments.empty())
        throw LauncherError(fmt::format("no subcommand; usage: {} (gpuleak --help for more)", kRunUsage));
    std::vector<std::string> own = arguments;
    if (arguments[0] == "run") {
        std::vector<std::string> after_run(arguments.begin() + 1, arguments.end());
        const size_t start = command_start(*run, after_run);
        own.assign(arguments.begin(), arguments.begin() + 1 + static_cast<std::ptrdiff_t>(start));
        auto command = after_run.begin() + static_cast<std::ptrdiff_t>(start);
        if (command != after_run.end() && *command == "--")
            ++command;
        invocation.run.command.assign(command, after_run.end());
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
    }
    return invocation;
}

} // namespace gpuleak::launcher
