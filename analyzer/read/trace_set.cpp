#include "trace_set.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>

#include "gpuleak/trace_format.h"
#include "trace_error.h"

namespace gpuleak::analyzer {

namespace fs = std::filesystem;

namespace {

struct Identity {
    TraceLineage lineage;
    uint64_t start_realtime_ns = 0;
};

// Only the header: finding children must not decode every trace in a directory.
bool read_identity(const fs::path& path, Identity& identity) {
    std::ifstream file(path, std::ios::binary);
    format::FileHeader header{};
    if (!file.read(reinterpret_cast<char*>(&header), sizeof header))
        return false;
    if (std::memcmp(header.magic, format::kMagic, sizeof header.magic) != 0 ||
        header.format_version != format::kFormatVersion)
        return false;
    identity.lineage.path = fs::absolute(path).lexically_normal().string();
    identity.lineage.pid = header.pid;
    identity.lineage.ppid = header.ppid;
    identity.lineage.start_monotonic_ns = header.start_monotonic_ns;
    header.hostname[sizeof header.hostname - 1] = '\0';
    identity.lineage.hostname = header.hostname;
    header.parent_trace[sizeof header.parent_trace - 1] = '\0';
    identity.lineage.parent_trace = header.parent_trace;
    identity.start_realtime_ns = header.start_realtime_ns;
    return true;
}

std::vector<Identity> traces_in(const fs::path& directory) {
    std::vector<Identity> found;
    std::error_code error;
    for (const auto& entry : fs::directory_iterator(directory, error)) {
        Identity identity;
        if (entry.is_regular_file(error) && read_identity(entry.path(), identity))
            found.push_back(identity);
    }
    std::sort(found.begin(), found.end(),
              [](const Identity& a, const Identity& b) { return a.start_realtime_ns < b.start_realtime_ns; });
    return found;
}

} // namespace

bool is_child(const TraceLineage& child, const TraceLineage& parent) {
    if (!child.parent_trace.empty())
        return child.parent_trace == parent.path;
    return child.hostname == parent.hostname && child.ppid == parent.pid &&
           child.start_monotonic_ns >= parent.start_monotonic_ns;
}

std::vector<std::string> collect_traces(const std::vector<std::string>& arguments) {
    std::vector<std::string> result;
    std::set<std::string> seen;
    auto add = [&](const std::string& path) {
        if (seen.insert(path).second)
            result.push_back(path);
    };
    for (const std::string& argument : arguments) {
        std::error_code error;
        const fs::file_status status = fs::status(argument, error);
        if (error || !fs::exists(status))
            throw TraceError(argument, "no such file or directory");
        if (fs::is_directory(status)) {
            std::vector<Identity> traces = traces_in(argument);
            if (traces.empty())
                throw TraceError(argument, "directory holds no gpuleak trace");
            for (const Identity& trace : traces)
                add(trace.lineage.path);
            continue;
        }
        // A file that is not a trace still goes on: the reader says precisely what is wrong with it.
        Identity named;
        if (!read_identity(argument, named)) {
            add(argument);
            continue;
        }
        add(named.lineage.path);
        // Children (and theirs): the traces beside it that name it, or its pid, as their parent.
        std::vector<Identity> siblings = traces_in(fs::absolute(argument).parent_path());
        std::vector<Identity> parents{named};
        for (size_t i = 0; i < parents.size(); ++i) {
            for (const Identity& candidate : siblings) {
                if (seen.count(candidate.lineage.path) == 0 &&
                    is_child(candidate.lineage, parents[i].lineage)) {
                    add(candidate.lineage.path);
                    parents.push_back(candidate);
                }
            }
        }
    }
    return result;
}

} // namespace gpuleak::analyzer
