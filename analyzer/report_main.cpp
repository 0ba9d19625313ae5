// gpuleak-report: what holds the GPU memory of a traced run, since when, and which line put it there.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <cstdlib>
#include <fcntl.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <unistd.h>

#include "file_bytes.h"
#include "printable.h"
#include "render_json.h"
#include "render_text.h"
#include "render_torch_snapshot.h"
#include "report_builder.h"
#include "symbol_cache.h"
#include "trace_error.h"
#include "trace_set.h"

namespace {

constexpr int kBadInput = 2;

// One line on stderr. What it names (file names, a trace's paths and warnings) may hold anything: it
// stays one line and drives no terminal.
void say(const std::string& message) {
    std::fprintf(stderr, "gpuleak-report: %s\n", gpuleak::printable(message).c_str());
}

// Whether the file exists and is a terminal (-o /dev/tty): opening it changes nothing, not even its size.
bool names_terminal(const std::string& path) {
    // Neither through a link nor waiting on a FIFO: write_regular_file refuses both after it.
    const int fd = open(path.c_str(), O_WRONLY | O_NOCTTY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0)
        return false;
    const bool terminal = isatty(fd) != 0;
    close(fd);
    return terminal;
}

int run(int argc, char** argv) {
    using namespace gpuleak::analyzer;
    CLI::App app{"gpuleak-report: explains the GPU memory of a traced run: leaks, cache growth, OOM sites"};
    std::vector<std::string> inputs;
    std::string output_format = "text";
    std::string output_path;
    ReportOptions options;
    bool no_color = false;
    bool use_debuginfod = false;
    bool no_symbol_cache = false;
    bool any_owner = false;
    SymbolizeOptions symbolize;
    app.add_option("traces", inputs,
                   "trace files, or directories of trace files (children are found beside "
                   "their parent's trace)")
        ->required();
    app.add_option("--format", output_format,
                   "text, json, or torch-snapshot: PyTorch's memory snapshot pickle of one process, for "
                   "python -m torch.cuda._memory_viz and pytorch.org/memory_viz (needs -o)")
        ->check(CLI::IsMember({"text", "json", "torch-snapshot"}));
    app.add_option("-o,--output", output_path, "write the report to this file instead of stdout");
    app.add_option("--top", options.top, "leak origins and failures listed per process")
        ->check(CLI::Range(1, 100000));
    app.add_option("--min-bytes", options.min_bytes, "leave out leak origins smaller than this");
    app.add_option("--stack-depth", options.stack_depth, "frames shown per stack")
        ->check(CLI::Range(1, 1024));
    app.add_flag("--native", options.native,
                 "show every native frame of a Python program's stacks, the Python frames among them");
    app.add_flag("--full-names", options.full_names,
                 "native functions with their parameter lists and return types");
    app.add_flag("--live-blocks", options.live_blocks,
                 "JSON: each leak origin also lists its live allocations as [address, size] pairs");
    app.add_flag("--no-color", no_color, "no colour, even on a terminal");
    app.add_option(
        "--debug-dir", symbolize.debuginfo_path,
        "where separate debug info is looked for, elfutils' syntax (default :.debug:/usr/lib/debug)");
    app.add_flag("--debuginfod", use_debuginfod,
                 "let elfutils fetch missing debug info from the servers in DEBUGINFOD_URLS");
    app.add_flag("--no-symbol-cache", no_symbol_cache,
                 "neither use nor keep the frames of earlier reports (kept in $GPULEAK_CACHE_DIR, else "
                 "$XDG_CACHE_HOME/gpuleak/symbols or ~/.cache/gpuleak/symbols)");
    app.add_flag("--any-owner", any_owner,
                 "also read the traces of other users found in a directory or beside a trace named");
    CLI11_PARSE(app, argc, argv);

    // Debian sets DEBUGINFOD_URLS in login shells: without this a report would quietly go to the network.
    if (!use_debuginfod)
        unsetenv("DEBUGINFOD_URLS");
    const bool snapshot = output_format == "torch-snapshot";
    if (snapshot && (output_path.empty() || output_path == "-" || names_terminal(output_path))) {
        say("--format torch-snapshot writes a binary pickle: name a file with -o FILE");
        return kBadInput;
    }
    options.color = !no_color && output_path.empty() && output_format == "text" && isatty(STDOUT_FILENO) != 0;
    std::vector<ProcessReport> reports;
    try {
        // Reading ahead could fetch debug info over the network that the report never shows, and would
        // move the lines that libdebuginfod writes to stderr when its lookups are traced.
        symbolize.read_ahead = !use_debuginfod && std::getenv("DEBUGINFOD_VERBOSE") == nullptr;
        if (!no_symbol_cache)
            symbolize.cache_directory = default_symbol_cache_directory();
        CollectedTraces collected = collect_traces(inputs, any_owner);
        if (!collected.foreign.empty())
            say(fmt::format("warning: left out {} trace{} of another user (--any-owner reads them): {}",
                            collected.foreign.size(), collected.foreign.size() == 1 ? "" : "s",
                            fmt::join(collected.foreign, ", ")));
        std::vector<std::string> paths = std::move(collected.paths);
        // A snapshot is PyTorch's view of one process: the first trace, the one named or in a directory
        // the first to start (the parent), as a child's segments are on devices of their own context.
        if (snapshot && paths.size() > 1) {
            say(fmt::format("warning: a snapshot is of one process: {}; {} other traces left out (name each "
                            "one to export it)",
                            paths.front(), paths.size() - 1));
            paths.resize(1);
        }
        reports = build_reports(paths, symbolize, snapshot);
    } catch (const TraceError& error) {
        say(error.what());
        return kBadInput;
    }
    // The text report lists warnings with each process; JSON keeps them in the data, so say them here
    // too, and a snapshot has no place for them.
    if (output_format != "text") {
        for (const ProcessReport& report : reports)
            for (const std::string& warning : report.model.warnings)
                say(fmt::format("{}: warning: {}", report.model.path, warning));
    }

    // Command lines, paths and labels come from the traced program and may not be UTF-8; JSON must be,
    // and the strict default would throw (an abort) instead of writing U+FFFD for those bytes.
    constexpr auto kReplaceInvalid = nlohmann::json::error_handler_t::replace;
    std::string text;
    if (snapshot) {
        std::vector<std::string> warnings;
        text = render_torch_snapshot(reports.front(), options, warnings);
        // The snapshot reads the trace again, for every live object's address and every event.
        if (reports.front().trace->shrank()) {
            say(fmt::format(
                "{}: the file was cut shorter while it was read (by another program?): no snapshot",
                reports.front().model.path));
            return kBadInput;
        }
        for (const std::string& warning : warnings)
            say(fmt::format("{}: warning: {}", reports.front().model.path, warning));
    } else if (output_format == "json") {
        text = render_json(reports, options).dump(2, ' ', false, kReplaceInvalid) + "\n";
    } else {
        text = render_text(reports, options);
    }
    if (output_path.empty()) {
        std::fwrite(text.data(), 1, text.size(), stdout);
        return 0;
    }
    // 0600 as gpuleak run's reports: it holds the traced programs' stacks and paths.
    if (const int failure = gpuleak::write_regular_file(output_path.c_str(), text.data(), text.size(), 0600);
        failure != 0) {
        say(fmt::format("{}: cannot write the report: {}", output_path,
                        gpuleak::write_failure_text(failure)));
        return kBadInput;
    }
    return 0;
}

} // namespace

int main(int argc, char** argv) {
    // Bad input is a TraceError, handled in run(); anything else is a bug or exhaustion, still one line.
    try {
        return run(argc, argv);
    } catch (const std::exception& error) {
        say(fmt::format("internal error: {}", error.what()));
        return 3;
    }
}
