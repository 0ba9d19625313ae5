#include "launcher/watch_command.h"

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fmt/format.h>
#include <memory>
#include <thread>
#include <unistd.h>

#include "launcher/interruption.h"
#include "launcher/launcher_error.h"
#include "read/trace_error.h"
#include "read/trace_set.h"
#include "render/render_watch.h"
#include "report/report_builder.h"
#include "symbols/symbol_cache.h"

namespace gpuleak::launcher {

namespace {

constexpr int kNoTrace = 2;

// Where the target's traces are: a pid's own trace (its workers' are found beside it each frame, as
// they start), else the directory or trace named.
std::string traces_named_by(const std::string& target) {
    int32_t pid = 0;
    const auto [end, error] = std::from_chars(target.data(), target.data() + target.size(), pid);
    if (error == std::errc() && end == target.data() + target.size() && pid > 0)
        return analyzer::trace_written_by(pid);
    return target;
}

bool any_running(analyzer::ReportSet& reports) {
    return std::any_of(reports.all().begin(), reports.all().end(), [](const analyzer::ProcessReport& report) {
        const analyzer::ProcessEnd& end = report.model.header.end;
        return end.state == format::EndState::Running && end.running_when_opened == true;
    });
}

// Waits `seconds`: true, or false as soon as an interrupt came.
bool waited(double seconds) {
    const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
    while (!interrupted() && std::chrono::steady_clock::now() < until)
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
    return !interrupted();
}

// The frames; throws TraceError for a target that names no trace.
int watch_frames(const WatchRequest& request) {
    // As gpuleak run's report: never to the network (Debian sets DEBUGINFOD_URLS in login shells).
    ::unsetenv("DEBUGINFOD_URLS");
    analyzer::SymbolizeOptions symbolize;
    symbolize.cache_directory = analyzer::default_symbol_cache_directory();
    // Each frame is a report: the libraries are opened once for all of them, and their debug info read
    // as a frame needs it.
    symbolize.read_ahead = false;
    symbolize.modules =
        std::make_shared<analyzer::ModuleRegistry>(symbolize.debuginfo_path, symbolize.cache_directory);
    const bool terminal = ::isatty(STDOUT_FILENO) != 0;
    analyzer::WatchOptions options;
    options.color = terminal;
    notice_interruptions();
    const std::string traces = traces_named_by(request.target);
    bool shown = false;
    int failed_in_a_row = 0;
    for (;;) {
        analyzer::ReportSet reports;
        try {
            reports = analyzer::build_reports(analyzer::collect_traces({traces}).paths, symbolize);
            failed_in_a_row = 0;
        } catch (const analyzer::TraceError&) {
            // A trace caught as it is made (a worker that starts): the next frame reads it whole. What
            // still fails after that many tries, or from the first frame on, is said.
            constexpr int kTries = 10;
            if (!shown || request.once || ++failed_in_a_row == kTries)
                throw;
            if (!waited(request.interval))
                return 0;
            continue;
        }
        // Drawn over the last one on a terminal; one after another in a file or a pipe, each ended by a
        // form feed's line, so that a reader (the notebook's %gpuleak watch) knows when it has a frame whole.
        std::string frame = terminal && !request.once ? "\033[H\033[2J" : "";
        frame += analyzer::render_watch_frame(reports, options);
        if (request.once)
            frame += '\n';
        else if (!terminal)
            frame += "\n\f\n";
        std::fwrite(frame.data(), 1, frame.size(), stdout);
        std::fflush(stdout);
        shown = true;
        if (request.once || !any_running(reports) || !waited(request.interval))
            return 0;
    }
}

} // namespace

int watch_command(const WatchRequest& request) {
    try {
        return watch_frames(request);
    } catch (const analyzer::TraceError& error) {
        throw LauncherError(fmt::format("watch: {}", error.what()), kNoTrace);
    }
}

} // namespace gpuleak::launcher
