// `gpuleak watch TARGET`: a running traced program's memory, live, read from its traces while they are
// written, without touching the program: no signal, no lock, nothing injected (render_watch.h says what a
// frame shows). Each frame reads the traces again, which costs this process's time, not the program's.
#pragma once

#include <string>

namespace gpuleak::launcher {

struct WatchRequest {
    // A pid of this machine (the process writing a trace), a run's directory or a trace.
    std::string target;
    bool once = false;     // one frame, then exit
    double interval = 1.0; // seconds between frames
};

// A frame each interval until every traced process has ended (the last frame says how each ended, and its
// diagnosis), or until interrupted (SIGINT, SIGTERM). 0, or 2 with one line on stderr for a target that
// names no trace.
int watch_command(const WatchRequest& request);

} // namespace gpuleak::launcher
