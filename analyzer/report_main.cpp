// gpuleak-report: what holds the GPU memory of a traced run, since when, and which line put it there.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fcntl.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <optional>
#include <unistd.h>

#include "common/file_bytes.h"
#include "common/printable.h"
#include "read/trace_error.h"
#include "read/trace_set.h"
#include "render/renderers.h"
#include "report/merged_report.h"
#include "report/report_builder.h"
#include "report/site_changes.h"
#include "symbols/symbol_cache.h"

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

// What changed from the first marker asked about (--between) to the second; none when the process set
// no such marker, or the event ring no longer reaches back to it, which is said on stderr.
std::optional<gpuleak::analyzer::Comparison> compare_markers(gpuleak::analyzer::ProcessReport& report) {
    using namespace gpuleak::analyzer;
    const ProcessModel& model = report.model;
    for (const Moment& moment : model.moments) {
        if (!moment.time_ns) {
            std::vector<std::string> labels;
            for (const Marker& marker : model.markers)
                if (std::find(labels.begin(), labels.end(), marker.label) == labels.end())
                    labels.push_back(marker.label);
            constexpr size_t kLabelsShown = 5;
            std::string known = "it set no markers";
            if (!labels.empty()) {
                const size_t more = labels.size() > kLabelsShown ? labels.size() - kLabelsShown : 0;
                labels.resize(labels.size() - more);
                known = fmt::format("its markers: \"{}\"{}", fmt::join(labels, "\", \""),
                                    more > 0 ? fmt::format(" and {} more", more) : "");
            }
            // Markers past a full notable array were not kept, nor labels past full strings: it may be one of
            // them.
            const Exactness& exactness = model.exactness;
            const std::string lost =
                exactness.notable_dropped == 0 && exactness.strings_dropped == 0
                    ? std::string()
                    : "; the trace had no room for all of them: a larger GPULEAK_MAX_MB keeps more";
            say(fmt::format("{}: no marker \"{}\" ({}{})", model.path, moment.label, known, lost));
            return std::nullopt;
        }
        if (!moment.reached) {
            say(fmt::format(
                "{}: the event ring no longer reaches back to \"{}\" at {:.1f} s: its oldest {} of {} "
                "events were overwritten (a larger GPULEAK_MAX_MB keeps more)",
                model.path, moment.label, seconds_of(*moment.time_ns), model.events_overwritten,
                model.events));
            return std::nullopt;
        }
    }
    const Moment& before = model.moments[0];
    const Moment& after = model.moments[1];
    return compare({&report, before.time_ns, before.label, before.sites},
                   {&report, after.time_ns, after.label, after.sites});
}

// Where the report goes, as it is made: stdout, or the file -o names, which the report replaces once
// whole (ReplacingFile). The file is made at the first part written: a format with nothing to say of the
// traces leaves none.
class ReportOutput {
  public:
    explicit ReportOutput(const std::string& path) : path_(path) {
        // 0600 as gpuleak run's reports: it holds the traced programs' stacks and paths.
        if (!path.empty())
            file_.emplace(path.c_str(), 0600);
    }

    void write(std::string_view part) {
        if (part.empty())
            return;
        written_ = true;
        if (file_)
            file_->write(part.data(), part.size());
        else
            std::fwrite(part.data(), 1, part.size(), stdout);
    }
    [[nodiscard]] bool written() const { return written_; }
    // The exit status, once the report is whole; a failure to write it said.
    int finish() {
        const int failure = file_ && file_->started() ? file_->commit() : 0;
        if (failure == 0)
            return 0;
        say(fmt::format("{}: cannot write the report: {}", path_, gpuleak::write_failure_text(failure)));
        return kBadInput;
    }

  private:
    std::string path_;
    std::optional<gpuleak::ReplacingFile> file_;
    bool written_ = false;
};

// `text`, a report made whole, to stdout or to `output_path`; the exit status.
int write_report(std::string_view text, const std::string& output_path) {
    ReportOutput output(output_path);
    output.write(text);
    return output.finish();
}

// --merge: the machines' reports of a job as one.
int merged_report(const std::vector<std::string>& inputs, const gpuleak::analyzer::Renderer& renderer,
                  const gpuleak::analyzer::ReportOptions& options, const std::string& output_path) {
    using namespace gpuleak::analyzer;
    if (renderer.render_merged == nullptr) {
        std::vector<std::string_view> able;
        for (const Renderer& other : renderers())
            if (other.render_merged != nullptr)
                able.push_back(other.name);
        say(fmt::format("--format {} cannot show merged reports: {} can", renderer.name,
                        fmt::join(able, ", ")));
        return kBadInput;
    }
    MergedReport merged;
    try {
        merged = merge_reports(inputs);
    } catch (const TraceError& error) {
        say(error.what());
        return kBadInput;
    }
    for (const std::string& warning : merged.warnings)
        say(warning);
    return write_report(renderer.render_merged(merged, options), output_path);
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
    std::vector<std::string> format_names;
    std::string format_help;
    for (const Renderer& renderer : renderers()) {
        format_names.emplace_back(renderer.name);
        format_help += fmt::format("\n  {}: {}{}", renderer.name, renderer.description,
                                   renderer.binary ? " (needs -o)" : "");
    }
    app.add_option("--format", output_format, "the report's format, text unless named:" + format_help)
        ->check(CLI::IsMember(format_names));
    app.add_flag_callback(
        "--list-formats",
        [] {
            fmt::print("{}", format_table_json());
            throw CLI::Success();
        },
        "print the formats as JSON (schema gpuleak-formats/1) and exit");
    bool diff = false;
    std::vector<std::string> between;
    CLI::Option* diff_flag =
        app.add_flag("--diff", diff,
                     "what changed from the first trace named to the second, at their ends (two trials, two "
                     "runs, before and after a fix): the sites whose live bytes grew or shrank, the largest "
                     "change first; text, json or html");
    app.add_option(
           "--between", between,
           "what changed in the trace from one marker to another (--between \"epoch 2\" \"epoch 9\"), "
           "as --diff")
        ->expected(2)
        ->excludes(diff_flag);
    bool merge = false;
    app.add_flag("--merge", merge,
                 "read the report.json that gpuleak run wrote of each machine's run of a job (the files, or "
                 "the job's -o DIR) as one report, without reading their traces: the ranks, what they say "
                 "together, the devices that processes shared; text, json or html")
        ->excludes(diff_flag)
        ->excludes("--between");
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
    const Renderer& renderer = *find_renderer(output_format);
    if (renderer.binary && (output_path.empty() || output_path == "-" || names_terminal(output_path))) {
        say(fmt::format("--format {} writes binary data: name a file with -o FILE", renderer.name));
        return kBadInput;
    }
    options.color = !no_color && output_path.empty() &&
                    (output_format == "text" || output_format == "watch") && isatty(STDOUT_FILENO) != 0;
    const bool changes = diff || !between.empty();
    if (changes && renderer.render_changes == nullptr) {
        std::vector<std::string_view> able;
        for (const Renderer& other : renderers())
            if (other.render_changes != nullptr)
                able.push_back(other.name);
        say(fmt::format("--format {} cannot show what changed: {} can{}", renderer.name,
                        fmt::join(able, ", "),
                        renderer.name == "pprof" ? " (pprof compares two profiles itself: go tool pprof "
                                                   "-diff_base BEFORE.pb.gz AFTER.pb.gz)"
                                                 : ""));
        return kBadInput;
    }
    if (merge)
        return merged_report(inputs, renderer, options, output_path);
    if (diff && inputs.size() != 2) {
        say("--diff compares two traces: name the one before and the one after (each a trace file or a "
            "directory)");
        return kBadInput;
    }
    ReportSet reports;
    try {
        // Reading ahead could fetch debug info over the network that the report never shows, and would
        // move the lines that libdebuginfod writes to stderr when its lookups are traced.
        symbolize.read_ahead = !use_debuginfod && std::getenv("DEBUGINFOD_VERBOSE") == nullptr;
        if (!no_symbol_cache)
            symbolize.cache_directory = default_symbol_cache_directory();
        const auto collected_paths = [&](const std::vector<std::string>& names) {
            CollectedTraces collected = collect_traces(names, any_owner);
            if (!collected.foreign.empty())
                say(fmt::format("warning: left out {} trace{} of another user (--any-owner reads them): {}",
                                collected.foreign.size(), collected.foreign.size() == 1 ? "" : "s",
                                fmt::join(collected.foreign, ", ")));
            return std::move(collected.paths);
        };
        // Of one process (PyTorch's snapshot, what changed in a process): the first trace, the one named or
        // in a directory the first to start (the parent), as a child's segments are on devices of their own
        // context.
        const auto first_process = [&](std::vector<std::string> paths, const std::string& what) {
            if (paths.size() > 1)
                say(fmt::format("warning: {} is of one process: {}; {} other traces left out (name each one "
                                "to see it)",
                                what, paths.front(), paths.size() - 1));
            return paths.front();
        };
        std::vector<std::string> paths;
        if (diff) {
            for (const std::string& input : inputs)
                paths.push_back(first_process(collected_paths({input}), "--diff"));
        } else if (!between.empty()) {
            paths.push_back(first_process(collected_paths(inputs), "--between"));
        } else if (renderer.one_process) {
            paths.push_back(
                first_process(collected_paths(inputs), fmt::format("--format {}", renderer.name)));
        } else {
            paths = collected_paths(inputs);
        }
        reports = build_reports(paths, symbolize, renderer.detail, between);
    } catch (const TraceError& error) {
        say(error.what());
        return kBadInput;
    }
    // The text report lists warnings with each process; other formats, and what changed, keep them in the
    // data or have no place for them, so say them here too.
    if (renderer.name != "text" || changes) {
        for (const ProcessReport& report : reports.all())
            for (const std::string& warning : report.model.warnings)
                say(fmt::format("{}: warning: {}", report.model.path, warning));
    }
    if (changes) {
        // Of one or two processes: kept whole.
        std::vector<ProcessReport>& compared = reports.all();
        std::optional<Comparison> comparison =
            diff ? compare(state_at_end(compared[0]), state_at_end(compared[1]))
                 : compare_markers(compared.front());
        if (!comparison)
            return kBadInput;
        return write_report(renderer.render_changes(*comparison, options), output_path);
    }
    ReportOutput output(output_path);
    std::vector<std::string> warnings;
    try {
        renderer.render(
            reports, options, [&](std::string_view part) { output.write(part); }, warnings);
    } catch (const TraceError& error) {
        // A trace read again for its process's part (ReportSet::whole) that is gone meanwhile: a file named
        // with -o is left as it was; stdout has had the report's first parts.
        say(error.what());
        return kBadInput;
    }
    for (const std::string& warning : warnings)
        say(warning);
    // A format with nothing to say of these traces (--format job of a run that is no job) said why.
    if (!output.written())
        return kBadInput;
    return output.finish();
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
