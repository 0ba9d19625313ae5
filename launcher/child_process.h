// Starting the command: fork, then exec with the PATH search a shell does, in the launcher's process
// group and with its standard input, output and error.
#pragma once

#include <string>
#include <sys/types.h>
#include <vector>

#include "launcher/signal_forwarding.h"

namespace gpuleak::launcher {

// Starts `command` with `environment` (KEY=VALUE entries) and returns its pid once the exec succeeded.
// Throws LauncherError with a shell's statuses when it did not: 127 when the command is not found, 126
// when it cannot be executed. `die_with_launcher`: the command is killed (SIGKILL) when the launcher
// ends, also by a SIGKILL it cannot catch, so that no command outlives the launcher that watches it.
pid_t start_command(const std::vector<std::string>& command, const std::vector<std::string>& environment,
                    const Supervision& supervision, bool die_with_launcher = false);

// The launcher's exit status for the command's wait status: its exit status, or 128+N for signal N.
int exit_status_of(int wait_status);

} // namespace gpuleak::launcher
