// `gpuleak run`: the command runs with every process it starts recorded into the run's directory; when
// it has ended, the launcher writes the report there, prints the summary on stderr and exits with the
// command's status.
#pragma once

#include "launcher/command_line.h"

namespace gpuleak::launcher {

// The command's exit status (128+N for signal N). Throws LauncherError when the command could not be
// started.
int run_command(const RunRequest& request);

} // namespace gpuleak::launcher
