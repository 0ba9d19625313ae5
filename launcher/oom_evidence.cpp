#include "launcher/oom_evidence.h"

#include "common/cgroup_paths.h"

#include <cerrno>
#include <fcntl.h>
#include <fmt/format.h>
#include <fstream>
#include <sstream>
#include <unistd.h>

namespace gpuleak::launcher {

namespace {

// The value after `key` on its own line of a "key value" file (memory.events, memory.oom_control).
std::optional<uint64_t> counter(const std::string& path, const std::string& key) {
    std::ifstream file(path);
    std::string name;
    uint64_t value = 0;
    while (file >> name >> value)
        if (name == key)
            return value;
    return std::nullopt;
}

} // namespace

std::optional<uint64_t> cgroup_oom_kills(const std::string& proc_self_cgroup,
                                         const std::string& cgroup_root) {
    CgroupDirectories directories{};
    memory_cgroup_directories(proc_self_cgroup.c_str(), cgroup_root.c_str(), directories);
    std::optional<uint64_t> v2;
    if (directories.v2[0] != '\0')
        v2 = counter(fmt::format("{}/memory.events", directories.v2), "oom_kill");
    if (v2 || directories.v1[0] == '\0')
        return v2;
    return counter(fmt::format("{}/memory.oom_control", directories.v1), "oom_kill");
}

std::optional<uint64_t> cgroup_oom_kills() {
    std::ifstream file("/proc/self/cgroup");
    std::stringstream text;
    text << file.rdbuf();
    return cgroup_oom_kills(text.str(), "/sys/fs/cgroup");
}

bool names_oom_kill(const std::string& record, pid_t pid) {
    // "Killed process" is also what older kernels wrote, without "Out of memory:" before it.
    const std::string wanted = fmt::format("Killed process {} (", pid);
    return record.find(wanted) != std::string::npos;
}

KernelLogVerdict kernel_log_oom_kill(pid_t pid) {
    const int fd = ::open("/dev/kmsg", O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0)
        return KernelLogVerdict::Unreadable;
    // One record per read, up to the end of the buffer (EAGAIN); EPIPE says records were overwritten
    // while reading, and the next read goes on from the oldest left.
    char record[8192];
    KernelLogVerdict verdict = KernelLogVerdict::Silent;
    for (;;) {
        const ssize_t got = ::read(fd, record, sizeof record);
        if (got < 0 && (errno == EPIPE || errno == EINTR))
            continue;
        if (got < 0 && errno != EAGAIN)
            verdict = KernelLogVerdict::Unreadable;
        if (got <= 0)
            break;
        if (names_oom_kill(std::string(record, static_cast<size_t>(got)), pid)) {
            verdict = KernelLogVerdict::Names;
            break;
        }
    }
    ::close(fd);
    return verdict;
}

} // namespace gpuleak::launcher
