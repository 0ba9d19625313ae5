// What `gpuleak watch` shows of a traced program while it runs, one frame at a time: each device's memory
// now, its recent history and peak; the sites growing now, with their rate and when the device is full at
// that rate; the failures so far; a line per process of a run of several. Once every process has ended,
// the frame ends with each one's diagnosis.
#pragma once

#include <cstddef>
#include <string>

#include "report/report_set.h"

namespace gpuleak::analyzer {

struct WatchOptions {
    size_t growing_sites = 5;    // sites growing now shown, of all the processes
    double history_seconds = 60; // how far back the history reaches
    size_t history_columns = 30; // one character each
    bool color = false;
};

std::string render_watch_frame(ReportSet& reports, const WatchOptions& options);

} // namespace gpuleak::analyzer
