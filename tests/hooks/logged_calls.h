// The programs that log one line per CUDA call, "<op> <name> key=value..." (api_families, return_codes,
// process_end and the other programs of test_api_families, test_process_behaviour and
// test_library_coexistence), run and read back.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "allocation_views.h"
#include "read/trace_reader.h"
#include "traced_run.h"

// One logged call. A value with spaces (a dlerror() message) is the line's last field.
struct LoggedCall {
    std::string op;   // alloc, free, trim (what the trace should show for it) or call (nothing)
    std::string name; // the function called
    std::vector<std::pair<std::string, std::string>> fields;
    std::string line; // as logged, for messages

    [[nodiscard]] bool has(const std::string& key) const;
    // The field's value; fails the test when the line has no such field.
    [[nodiscard]] const std::string& text(const std::string& key) const;
    [[nodiscard]] uint64_t number(const std::string& key) const; // decimal, or hex with 0x
    [[nodiscard]] int rc() const { return static_cast<int>(number("rc")); }
};

std::vector<LoggedCall> logged_calls(const std::vector<LogLine>& lines);

// The lines without the fields named in `varying` (addresses, handles of streams: they change from
// run to run), for comparing a run with gpuleak to one without.
std::vector<std::string> comparable(const std::vector<LoggedCall>& calls,
                                    const std::vector<std::string>& varying = {"address", "stream"});

// Options that add `entries` to the environment (GCC 12 takes designated initializers that leave out
// members of RunOptions for -Wmissing-field-initializers errors).
RunOptions with_environment(std::vector<std::string> entries);

// The same options for a run without gpuleak.
RunOptions without_gpuleak(RunOptions options = {});

struct LoggedRun {
    TracedRun run;
    std::vector<LoggedCall> calls;
};

// Runs `program` with <directory>/program.log as its first argument and `arguments` after it.
LoggedRun run_logged(const TempDir& directory, const std::string& program,
                     const std::vector<std::string>& arguments, const RunOptions& options = {});

// The run's only trace file, opened; fails the test when there is not exactly one.
gpuleak::analyzer::TraceReader only_trace(const TracedRun& run);

// The lines of `text` that start with "gpuleak: ": what gpuleak said on stderr.
std::vector<std::string> gpuleak_lines(const std::string& text);
