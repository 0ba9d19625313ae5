// The summary the launcher prints on stderr when the command has ended: how it ended (a SIGKILL weighed
// as an OOM kill), then from the report: peak memory, the diagnosis, the top leak origin and where the
// full report is. Lines without the "gpuleak: " prefix.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <sys/types.h>
#include <vector>

#include "launcher/oom_evidence.h"
#include "launcher/run_report.h"

namespace gpuleak::launcher {

struct CommandEnd {
    std::string name; // as the command was given
    pid_t pid = 0;
    int wait_status = 0;
    double seconds = 0;
    uint64_t monotonic_ns = 0; // CLOCK_MONOTONIC as the launcher saw it end
    // The cgroup's OOM kills before and after the run.
    std::optional<uint64_t> oom_kills_before;
    std::optional<uint64_t> oom_kills_after;
    KernelLogVerdict kernel_log = KernelLogVerdict::Unreadable; // asked only after a SIGKILL
    // Who sent the signal that ended the command, as its trace says (analyzer::sender_text); empty where
    // that is not known.
    std::string sender;
};

// The command's own trace in the report: the newest image of its pid (after any exec); null without one.
const analyzer::ProcessReport* command_process(const CommandEnd& end,
                                               const std::vector<analyzer::ProcessReport>& processes);

[[nodiscard]] bool killed_by_sigkill(const CommandEnd& end);
// The OOM killer's count in the launcher's memory cgroup rose during the run, or the kernel log names the
// kill of the command.
[[nodiscard]] bool oom_kill_confirmed(const CommandEnd& end);

// How the command ended, and what the OOM killer did during the run.
std::vector<std::string> ending_lines(const CommandEnd& end);

// What the run's report says; one line saying why where it cannot be told.
std::vector<std::string> report_lines(const CommandEnd& end, RunReport& report);

} // namespace gpuleak::launcher
