#include "run_report.h"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include "launcher_error.h"
#include "render_json.h"
#include "render_text.h"
#include "report_builder.h"
#include "symbol_cache.h"
#include "trace_set.h"

namespace gpuleak::launcher {

namespace {

// 0600 and not through a symbolic link, as the traces are made: the report holds their stacks and paths.
void write_file(const std::string& path, const std::string& text) {
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
    int error = fd < 0 ? errno : 0;
    for (size_t written = 0; error == 0 && written < text.size();) {
        const ssize_t n = ::write(fd, text.data() + written, text.size() - written);
        if (n > 0)
            written += static_cast<size_t>(n);
        else if (n == 0 || errno != EINTR)
            error = n == 0 ? EIO : errno;
    }
    if (fd >= 0)
        ::close(fd);
    if (error != 0)
        throw LauncherError(fmt::format("{}: cannot write the report: {}", path, std::strerror(error)));
}

} // namespace

RunReport write_run_report(const std::string& directory) {
    // As gpuleak-report without --debuginfod: the report never goes to the network (Debian sets
    // DEBUGINFOD_URLS in login shells). The command, started already, keeps its own environment.
    ::unsetenv("DEBUGINFOD_URLS");
    RunReport report;
    analyzer::SymbolizeOptions symbolize;
    symbolize.cache_directory = analyzer::default_symbol_cache_directory();
    report.processes = analyzer::build_reports(analyzer::collect_traces({directory}), symbolize);
    const analyzer::ReportOptions options; // gpuleak-report's defaults, no colour in a file
    // Command lines and paths come from the traced programs and may not be UTF-8; JSON must be, and the
    // strict default would throw instead of writing U+FFFD for those bytes.
    const std::string json = analyzer::render_json(report.processes, options)
                                 .dump(2, ' ', false, nlohmann::json::error_handler_t::replace) +
                             "\n";
    report.text_path = directory + "/report.txt";
    report.json_path = directory + "/report.json";
    write_file(report.text_path, analyzer::render_text(report.processes, options));
    write_file(report.json_path, json);
    return report;
}

} // namespace gpuleak::launcher
