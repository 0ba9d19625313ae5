// What the launcher adds to its child's trace once the child has died: the end of a child that could not
// record its own (SIGKILL), and who sent the signal where the launcher knows better than the child did
// (a signal it passed on, Jupyter ending its kernel).
#pragma once

#include <optional>
#include <string>
#include <sys/types.h>

#include "gpuleak/trace_format.h"
#include "run_directory.h"
#include "run_summary.h"
#include "signal_forwarding.h"

namespace gpuleak::launcher {

// CLOCK_MONOTONIC now, the clock of the trace's times.
uint64_t monotonic_now_ns();

// The sender of a signal another process sent, as the end record holds it.
format::EndSender process_sender(format::SenderKind kind, const SignalOrigin& origin);

// The end record of `pid`'s trace in `directory` (its newest image's), when it has none or one saying
// the process died by `signal`: the process died by `signal`, sent by `sender`, written by the launcher.
// The time the process recorded is kept; without one, `monotonic_ns` (CLOCK_MONOTONIC as the launcher saw
// the death). Nothing where no such trace is there; false then.
bool record_child_end(const RunDirectory& directory, pid_t pid, int signal, format::EndSender sender,
                      uint64_t monotonic_ns);

// The sender the trace of `pid` in `directory` recorded for the signal that ended it, if it recorded one.
std::optional<format::EndSender> recorded_sender(const RunDirectory& directory, pid_t pid);

// What the launcher knows of how its child ended, into the child's trace once it has died: a SIGKILL,
// which the child could not record, sent by the OOM killer where that is confirmed (run_summary.h); a
// signal the launcher passed on, sent by whoever sent it to the launcher. With `jupyter` (the kernel
// launcher, which Jupyter started): a signal Jupyter sent it, as the notebook's (a restart, a shutdown).
// Returns whether Jupyter ended the child so.
bool record_how_child_ended(const CommandEnd& end, const RunDirectory& directory,
                            const Supervision& supervision, bool jupyter);

} // namespace gpuleak::launcher
