// `gpuleak kernel run -- python -m ipykernel_launcher -f CONNECTION_FILE`: a Jupyter kernel under the
// launcher, as a gpuleak kernelspec starts it. Its traces go to a directory per kernel and start; when the
// kernel dies (killed, crashed) the post-mortem report and a summary are written there, and the next
// kernel started for the same connection file is handed the summary to show.
#pragma once

#include <string>
#include <vector>

#include "launcher/command_line.h"

namespace gpuleak::launcher {

// Where every kernel's directories go: $XDG_STATE_HOME/gpuleak/kernels, else
// ~/.local/state/gpuleak/kernels.
std::string kernels_state_directory();

// The kernel's key: the stem of its connection file (ipykernel's -f FILE), kernel-<uuid> as Jupyter names
// them, the same for every restart of one kernel; "kernel-<pid>" when the command names none.
std::string kernel_key(const std::vector<std::string>& command, int pid);

// `request.command` is the kernel's command. Returns the kernel's exit status (128+N for signal N).
int run_kernel(const RunRequest& request);

} // namespace gpuleak::launcher
