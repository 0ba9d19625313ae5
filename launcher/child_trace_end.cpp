#include "launcher/child_trace_end.h"

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <ctime>
#include <dirent.h>
#include <fcntl.h>
#include <optional>
#include <sys/wait.h>
#include <unistd.h>

#include "common/file_descriptor.h"

namespace gpuleak::launcher {

namespace {

using format::FileHeader;

constexpr size_t kEndStart = offsetof(FileHeader, end_state);
constexpr size_t kEndSenderStart = offsetof(FileHeader, end_sender);

// A trace of `pid` written by this version's recorder, open for writing, with its header as read.
struct ChildTrace {
    FileDescriptor file{-1};
    FileHeader header{};
};

bool read_header(int fd, FileHeader& header) {
    return ::pread(fd, &header, sizeof header, 0) == static_cast<ssize_t>(sizeof header) &&
           std::memcmp(header.magic, format::kMagic, sizeof header.magic) == 0 &&
           header.endian_tag == format::kEndianTag && header.format_version == format::kFormatVersion;
}

// The newest image of `pid` among the directory's traces (an exec leaves the older one ended with Exec).
std::optional<ChildTrace> child_trace(const RunDirectory& directory, pid_t pid) {
    const int listing_fd = ::openat(directory.handle.get(), ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (listing_fd < 0)
        return std::nullopt;
    DIR* listing = ::fdopendir(listing_fd);
    if (listing == nullptr) {
        ::close(listing_fd);
        return std::nullopt;
    }
    std::optional<ChildTrace> newest;
    while (const dirent* entry = ::readdir(listing)) {
        const std::string_view name = entry->d_name;
        if (!name.ends_with(".trace"))
            continue;
        ChildTrace trace{FileDescriptor(
            ::openat(directory.handle.get(), entry->d_name, O_RDWR | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC))};
        if (trace.file.get() < 0 || !read_header(trace.file.get(), trace.header) || trace.header.pid != pid)
            continue;
        if (!newest || trace.header.start_realtime_ns > newest->header.start_realtime_ns)
            newest = std::move(trace);
    }
    ::closedir(listing);
    return newest;
}

bool has_end(const FileHeader& header) {
    return header.end_commit == format::kEndCommit;
}

// The process died by `signal`, sent by `sender`, written by the launcher, where the trace has no end or one
// saying so. The time the process recorded is kept; without one, `monotonic_ns`.
bool write_end(ChildTrace& trace, int signal, format::EndSender sender, uint64_t monotonic_ns) {
    FileHeader& header = trace.header;
    const bool ended = has_end(header);
    if (ended && (header.end_state != static_cast<uint32_t>(format::EndState::Signaled) ||
                  header.end_signal != signal))
        return false;
    sender.written_by = static_cast<uint32_t>(format::EndWriter::Launcher);
    header.end_state = static_cast<uint32_t>(format::EndState::Signaled);
    header.end_signal = signal;
    if (!ended)
        header.end_monotonic_ns = monotonic_ns;
    header.end_sender = sender;
    // As the recorder writes it: the commit word cleared first and stored last, so that a reader meanwhile
    // sees no end, or the whole of this one.
    const uint32_t cleared = 0;
    const int fd = trace.file.get();
    if (::pwrite(fd, &cleared, sizeof cleared, offsetof(FileHeader, end_commit)) != sizeof cleared)
        return false;
    const auto* bytes = reinterpret_cast<const char*>(&header);
    if (::pwrite(fd, bytes + kEndStart, offsetof(FileHeader, end_commit) - kEndStart, kEndStart) < 0 ||
        ::pwrite(fd, bytes + offsetof(FileHeader, end_monotonic_ns), sizeof header.end_monotonic_ns,
                 offsetof(FileHeader, end_monotonic_ns)) < 0 ||
        ::pwrite(fd, &header.end_sender, sizeof header.end_sender, kEndSenderStart) < 0)
        return false;
    const uint32_t commit = format::kEndCommit;
    return ::pwrite(fd, &commit, sizeof commit, offsetof(FileHeader, end_commit)) == sizeof commit;
}

// The sender of a signal another process sent, as the end record holds it.
format::EndSender process_sender(format::SenderKind kind, const SignalOrigin& origin) {
    format::EndSender sender{};
    sender.signal_code = SI_USER;
    sender.kind = static_cast<uint32_t>(kind);
    sender.pid = origin.pid;
    sender.uid = origin.uid;
    std::memcpy(sender.name, origin.name.data(), std::min(origin.name.size(), sizeof sender.name - 1));
    return sender;
}

} // namespace

uint64_t monotonic_now_ns() {
    timespec now{};
    ::clock_gettime(CLOCK_MONOTONIC, &now);
    return static_cast<uint64_t>(now.tv_sec) * 1'000'000'000u + static_cast<uint64_t>(now.tv_nsec);
}

bool record_how_child_ended(const CommandEnd& end, const RunDirectory& directory,
                            const Supervision& supervision, bool jupyter) {
    if (!WIFSIGNALED(end.wait_status))
        return false;
    const int signal = WTERMSIG(end.wait_status);
    std::optional<ChildTrace> trace = child_trace(directory, end.pid);
    if (signal == SIGKILL) {
        format::EndSender sender{};
        if (oom_kill_confirmed(end))
            sender.kind = static_cast<uint32_t>(format::SenderKind::OomKiller);
        if (trace)
            write_end(*trace, signal, sender, end.monotonic_ns);
        return false;
    }
    const std::optional<SignalOrigin> origin = supervision.origin_of(signal);
    if (!origin)
        return false;
    // Jupyter signals the launcher's whole process group: the kernel may have had it from either.
    if (jupyter && origin->pid == ::getppid()) {
        if (trace)
            write_end(*trace, signal, process_sender(format::SenderKind::Notebook, *origin),
                      end.monotonic_ns);
        return true;
    }
    // Passed on by the launcher, whose pid the child recorded.
    if (trace && has_end(trace->header) &&
        trace->header.end_sender.kind == static_cast<uint32_t>(format::SenderKind::Process) &&
        trace->header.end_sender.pid == ::getpid())
        write_end(*trace, signal, process_sender(format::SenderKind::Process, *origin), end.monotonic_ns);
    return false;
}

} // namespace gpuleak::launcher
