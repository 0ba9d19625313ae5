// The summary the launcher prints on stderr when the command has ended: how it ended (a SIGKILL weighed
// as an OOM kill), then from the report: peak memory, the diagnosis, the top leak origin and where the
// full report is. Lines without the "gpuleak: " prefix.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <sys/types.h>
#include <vector>

#include "oom_evidence.h"
#include "run_report.h"

namespace gpuleak::launcher {

struct CommandEnd {
    std::string name; // as the command was given
    pid_t pid = 0;
    int wait_status = 0;
    double seconds = 0;
    // The cgroup's OOM kills before and after the run.
    std::optional<uint64_t> oom_kills_before;
    std::optional<uint64_t> oom_kills_after;
    KernelLogVerdict kernel_log = KernelLogVerdict::Unreadable; // asked only after a SIGKILL
};

[[nodiscard]] bool killed_by_sigkill(const CommandEnd& end);

// How the command ended, and what the OOM killer did during the run.
std::vector<std::string> ending_lines(const CommandEnd& end);

// What the run's report says.
std::vector<std::string> report_lines(const CommandEnd& end, RunReport& report);

} // namespace gpuleak::launcher
