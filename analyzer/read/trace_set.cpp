#include "read/trace_set.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <string_view>

#include <cstdio>
#include <fmt/format.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "gpuleak/trace_format.h"
#include "read/trace_error.h"

namespace gpuleak::analyzer {

namespace fs = std::filesystem;

namespace {

struct Identity {
    TraceLineage lineage;
    uint64_t start_realtime_ns = 0;
    bool ended = false; // it has an end record
    bool ours = true;   // owned by the user running the report
};

// Only the header: finding children must not decode every trace in a directory.
bool read_identity(const fs::path& path, Identity& identity) {
    std::ifstream file(path, std::ios::binary);
    format::FileHeader header{};
    if (!file.read(reinterpret_cast<char*>(&header), sizeof header))
        return false;
    if (std::memcmp(header.magic, format::kMagic, sizeof header.magic) != 0 ||
        !format::readable_format_version(header.format_version))
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
    identity.ended = header.end_commit == format::kEndCommit;
    struct stat status {};
    identity.ours = ::stat(path.c_str(), &status) == 0 && status.st_uid == ::geteuid();
    return true;
}

// A file that a process maps, as /proc/PID/maps lists it.
struct FileMapping {
    unsigned major_number = 0;
    unsigned minor_number = 0;
    ino_t inode = 0;
    std::string path; // as the map names it: the file's name when it was mapped
};

// The files process `pid` maps; none where its map cannot be read (see process_exists).
std::optional<std::vector<FileMapping>> file_mappings(int32_t pid) {
    std::ifstream maps(fmt::format("/proc/{}/maps", pid));
    if (!maps.is_open())
        return std::nullopt;
    std::vector<FileMapping> mappings;
    std::string line;
    while (std::getline(maps, line)) {
        FileMapping mapping;
        unsigned long long inode = 0;
        const size_t slash = line.find('/');
        if (slash == std::string::npos ||
            std::sscanf(line.c_str(), "%*x-%*x %*s %*x %x:%x %llu", &mapping.major_number,
                        &mapping.minor_number, &inode) != 3 ||
            inode == 0)
            continue;
        mapping.inode = static_cast<ino_t>(inode);
        mapping.path = line.substr(slash);
        mappings.push_back(std::move(mapping));
    }
    return mappings;
}

// Whether process `pid` exists, where its map cannot be read: another user's, or one that is not dumpable.
bool process_exists(int32_t pid) {
    return ::access(fmt::format("/proc/{}", pid).c_str(), F_OK) == 0;
}

// Where stat and the maps disagree on the device (overlayfs names the file beneath, btrfs a subvolume's
// device), the file's name, which holds its writer's pid, tells it.
// Empty when the maps cannot be read although the process may be there: whether it runs cannot be told.
std::optional<bool> maps_file(int32_t pid, const fs::path& path, dev_t device, ino_t inode) {
    const std::optional<std::vector<FileMapping>> mappings = file_mappings(pid);
    if (!mappings)
        return process_exists(pid) ? std::nullopt : std::optional<bool>(false);
    const std::string name = "/" + path.filename().string();
    return std::any_of(mappings->begin(), mappings->end(), [&](const FileMapping& mapping) {
        return mapping.inode == inode &&
               ((mapping.major_number == major(device) && mapping.minor_number == minor(device)) ||
                mapping.path.ends_with(name));
    });
}

std::vector<Identity> traces_in(const fs::path& directory) {
    std::vector<Identity> found;
    std::error_code error;
    for (const auto& entry : fs::directory_iterator(directory, error)) {
        Identity identity;
        // Not a link: in a shared directory one could be pointed at a trace of the user's own while its
        // owner is checked, and at a forged one when it is read.
        if (!entry.is_symlink(error) && entry.is_regular_file(error) && read_identity(entry.path(), identity))
            found.push_back(identity);
    }
    std::sort(found.begin(), found.end(),
              [](const Identity& a, const Identity& b) { return a.start_realtime_ns < b.start_realtime_ns; });
    return found;
}

// The traces of a directory of runs: a job's directory, where each launch of the job (each machine, or
// each Slurm task) wrote its run into a directory of its own.
std::vector<Identity> traces_of_runs_in(const fs::path& directory) {
    std::vector<Identity> found;
    std::error_code error;
    for (const auto& entry : fs::directory_iterator(directory, error))
        if (!entry.is_symlink(error) && entry.is_directory(error))
            for (Identity& trace : traces_in(entry.path()))
                found.push_back(std::move(trace));
    return found;
}

} // namespace

bool is_child(const TraceLineage& child, const TraceLineage& parent) {
    if (!child.parent_trace.empty())
        return child.parent_trace == parent.path;
    return child.hostname == parent.hostname && child.ppid == parent.pid &&
           child.start_monotonic_ns >= parent.start_monotonic_ns;
}

CollectedTraces collect_traces(const std::vector<std::string>& arguments, bool any_owner) {
    CollectedTraces result;
    std::set<std::string> seen;
    auto add = [&](const std::string& path) {
        if (seen.insert(path).second)
            result.paths.push_back(path);
    };
    // Of the traces found rather than named: whether it is taken.
    auto taken = [&](const Identity& found) {
        if (found.ours || any_owner)
            return true;
        if (std::find(result.foreign.begin(), result.foreign.end(), found.lineage.path) ==
            result.foreign.end())
            result.foreign.push_back(found.lineage.path);
        return false;
    };
    for (const std::string& argument : arguments) {
        std::error_code error;
        const fs::file_status status = fs::status(argument, error);
        if (error || !fs::exists(status))
            throw TraceError(argument, "no such file or directory");
        if (fs::is_directory(status)) {
            std::vector<Identity> traces = traces_in(argument);
            if (traces.empty())
                traces = traces_of_runs_in(argument);
            if (traces.empty())
                throw TraceError(argument, "directory holds no gpuleak trace");
            size_t taken_here = 0;
            for (const Identity& trace : traces)
                if (taken(trace)) {
                    add(trace.lineage.path);
                    ++taken_here;
                }
            if (taken_here == 0)
                throw TraceError(argument,
                                 "directory holds no gpuleak trace of this user's (--any-owner reads "
                                 "other users' traces)");
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
                    is_child(candidate.lineage, parents[i].lineage) && taken(candidate)) {
                    add(candidate.lineage.path);
                    parents.push_back(candidate);
                }
            }
        }
    }
    // A trace named is read, wherever else it was found.
    std::erase_if(result.foreign, [&](const std::string& path) { return seen.count(path) != 0; });
    return result;
}

std::optional<bool> writer_running(const std::string& path, int32_t pid, const std::string& hostname) {
    char here[256] = {};
    // The header keeps as much of the name as fits its field.
    if (pid <= 0 || ::gethostname(here, sizeof here - 1) != 0 ||
        std::string_view(here).substr(0, sizeof format::FileHeader::hostname - 1) != hostname)
        return std::nullopt;
    struct stat file {};
    if (::stat(path.c_str(), &file) != 0)
        return std::nullopt;
    return maps_file(pid, path, file.st_dev, file.st_ino);
}

std::optional<bool> trace_writer_running(const std::string& path) {
    Identity identity;
    if (!read_identity(path, identity))
        return std::nullopt;
    return writer_running(path, identity.lineage.pid, identity.lineage.hostname);
}

std::string trace_written_by(int32_t pid) {
    const std::string process = fmt::format("pid {}", pid);
    const std::optional<std::vector<FileMapping>> mappings = file_mappings(pid);
    if (!mappings)
        throw TraceError(process, process_exists(pid)
                                      ? "its memory map cannot be read (another user's process?)"
                                      : "no such process");
    // The recorder maps its trace under a name of its own making, then gives it its name: the map names
    // the file's directory and inode, not its name. Each directory is listed once, for all its inodes.
    std::map<fs::path, std::set<ino_t>> mapped;
    for (const FileMapping& mapping : *mappings)
        mapped[fs::path(mapping.path).parent_path()].insert(mapping.inode);
    for (const auto& [directory, inodes] : mapped) {
        std::error_code error;
        for (fs::directory_iterator entry(directory, error), end; !error && entry != end;
             entry.increment(error)) {
            struct stat file {};
            // Only a regular file's header is read: opening a device (a GPU's) may do more.
            if (::lstat(entry->path().c_str(), &file) != 0 || !S_ISREG(file.st_mode) ||
                inodes.count(file.st_ino) == 0)
                continue;
            Identity identity;
            if (read_identity(entry->path(), identity) && identity.lineage.pid == pid)
                return identity.lineage.path;
        }
    }
    throw TraceError(process, "not recorded by gpuleak: it maps no trace of its own (give the pid of the "
                              "program started under gpuleak run, not of gpuleak itself)");
}

std::vector<TraceLineage> traces_still_written(const std::vector<std::string>& paths) {
    std::vector<TraceLineage> running;
    for (const std::string& path : paths) {
        Identity identity;
        if (read_identity(path, identity) && !identity.ended &&
            writer_running(path, identity.lineage.pid, identity.lineage.hostname).value_or(false))
            running.push_back(identity.lineage);
    }
    return running;
}

} // namespace gpuleak::analyzer
