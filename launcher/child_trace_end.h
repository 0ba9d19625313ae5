// What the launcher adds to its child's trace once the child has died: the end of a child that could not
// record its own (SIGKILL), and who sent the signal where the launcher knows better than the child did
// (a signal it passed on, Jupyter ending its kernel).
#pragma once

#include <cstdint>

#include "launcher/run_directory.h"
#include "launcher/run_summary.h"
#include "launcher/signal_forwarding.h"

namespace gpuleak::launcher {

// CLOCK_MONOTONIC now, the clock of the trace's times.
uint64_t monotonic_now_ns();

// What the launcher knows of how its child ended, into the child's trace once it has died: a SIGKILL,
// which the child could not record, sent by the OOM killer where that is confirmed (run_summary.h); a
// signal the launcher passed on, sent by whoever sent it to the launcher. With `jupyter` (the kernel
// launcher, which Jupyter started): a signal Jupyter sent it, as the notebook's (a restart, a shutdown).
// Returns whether Jupyter ended the child so.
bool record_how_child_ended(const CommandEnd& end, const RunDirectory& directory,
                            const Supervision& supervision, bool jupyter);

} // namespace gpuleak::launcher
