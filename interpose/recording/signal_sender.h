// Who sent a signal, from the siginfo its handler was given: what the end record says of the signal
// that ended the process.
#pragma once

#include <csignal>

#include "gpuleak/trace_format.h"

namespace gpuleak {

// Async-signal-safe. `info` may be null (a handler installed later that chains to ours without it): the
// sender is then unknown. A sender that is another process is named by its /proc/PID/comm, read now: it
// may have ended by the time anyone reads the trace.
format::EndSender signal_sender(const siginfo_t* info);

} // namespace gpuleak
