// Whether the kernel's OOM killer ended a process: the OOM-kill counter of the launcher's memory cgroup
// (which its command shares), read before and after the run, and the kernel log where it is readable.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <sys/types.h>

namespace gpuleak::launcher {

// The OOM kills counted in this process's memory cgroup: cgroup v2's memory.events or v1's
// memory.oom_control "oom_kill". Absent where neither can be read.
std::optional<uint64_t> cgroup_oom_kills();

// The same from the text of /proc/self/cgroup, with the cgroup file system mounted at `cgroup_root`.
std::optional<uint64_t> cgroup_oom_kills(const std::string& proc_self_cgroup, const std::string& cgroup_root);

enum class KernelLogVerdict {
    Unreadable, // /dev/kmsg cannot be read (kernel.dmesg_restrict without CAP_SYSLOG)
    Names,      // a record says the OOM killer killed the process
    Silent,     // readable, and no record says so
};

// What the kernel log says about `pid`. A pid is the kernel's own, so in another pid namespace (a
// container) the log cannot name the process: Silent there proves nothing.
KernelLogVerdict kernel_log_oom_kill(pid_t pid);

// Whether one kernel log record reports the OOM killer killing `pid`: "Out of memory: Killed process
// 4242 (python) ..." or "Memory cgroup out of memory: Killed process 4242 (python) ...".
bool names_oom_kill(const std::string& record, pid_t pid);

} // namespace gpuleak::launcher
