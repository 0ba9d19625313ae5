// Which trace files a report covers: the files named, every trace in a directory named (or, in a job's
// directory that holds none itself, in each run directory it holds), and the traces of the children of each
// (forked workers name their parent's trace; exec'd children their parent's pid), found beside it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace gpuleak::analyzer {

// What a trace's header says of whose child its process is.
struct TraceLineage {
    std::string path; // the trace's own
    std::string hostname;
    int32_t pid = 0;
    int32_t ppid = 0;
    uint64_t start_monotonic_ns = 0;
    std::string parent_trace; // named by a forked child
};

// `child` was forked by `parent` (it names the parent's trace) or started by it: an exec'd child has
// the parent's pid as its parent's, on the same machine (pids and clocks are a machine's own), and
// started after it.
bool is_child(const TraceLineage& child, const TraceLineage& parent);

struct CollectedTraces {
    std::vector<std::string> paths;
    // Traces another user owns, in a directory named or beside a trace named, left out: in a shared
    // directory anyone can drop a trace that names another's as its parent.
    std::vector<std::string> foreign;
};

// `any_owner`: other users' traces are taken too. A trace named itself is always taken. Throws
// TraceError (one line) when an argument names nothing readable or a directory holds no trace to take.
CollectedTraces collect_traces(const std::vector<std::string>& arguments, bool any_owner = false);

// Whether the process writing the trace at `path`, pid `pid` on `hostname`, still runs: that pid on this
// machine maps the file (a pid since reused does not). Empty when it cannot be told: another machine's
// trace, or one whose header cannot be read.
std::optional<bool> writer_running(const std::string& path, int32_t pid, const std::string& hostname);

// The same for the trace at `path`, as its header names its process.
std::optional<bool> trace_writer_running(const std::string& path);

// The trace that process `pid` of this machine writes, as its memory map names it. Throws TraceError (one
// line) where there is no such process, its map cannot be read, or it writes no trace.
std::string trace_written_by(int32_t pid);

// The traces among `paths` that have no end record and whose processes still run.
std::vector<TraceLineage> traces_still_written(const std::vector<std::string>& paths);

} // namespace gpuleak::analyzer
