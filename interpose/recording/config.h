// Settings read from GPULEAK_* environment variables once, when the recorder starts in a process.
#pragma once

#include <cstddef>
#include <cstdint>

#include "gpuleak/config_limits.h"

namespace gpuleak {

struct Config {
    char output_pattern[kOutputPatternCapacity]; // GPULEAK_OUTPUT, "%p" expands to the pid, "%r" to the rank
    uint64_t max_bytes;                          // GPULEAK_MAX_MB
    bool max_bytes_chosen;                       // GPULEAK_MAX_MB was set, rather than left at its default
    uint32_t stack_depth;                        // GPULEAK_STACK_DEPTH, 0 = no stacks
    uint32_t sample_interval_ms;                 // GPULEAK_SAMPLE_MS
    bool quiet;                                  // GPULEAK_QUIET
    bool python_stacks; // GPULEAK_PYTHON: Python frames in stacks (up to stack_depth of them)
    // GPULEAK_ALL_PROCESSES: Python programs and the forked children of recorded processes are recorded
    // from their start for host memory, also when they never use CUDA.
    bool all_processes;
    // GPULEAK_WHY: the moments (GPULEAK_WHY_* bits of gpuleak.h) at which what holds the device memory is
    // found and recorded, besides each call of gpuleak.why().
    uint32_t why_moments;
    // Not a variable: gpuleak attach began the recording in a process that was running already
    // (HeaderFlag::Attached).
    bool attached;
};

// Reads the environment; a malformed value gets one warning on stderr and the default.
Config read_config();

// GPULEAK_WHY's value as GPULEAK_WHY_* bits: a comma-separated list of "oom" and "phase", or "none" (also
// "off" or "0"), in any case; unset or empty: "oom". A malformed value gets one warning and the default.
uint32_t why_moments_setting(const char* value);

// RANK, else LOCAL_RANK, when it is a number of at most kMaxRankDigits digits; nullptr otherwise.
const char* rank_from_environment();

// The environment variable `name` as a number of at most kMaxRankDigits digits; -1 otherwise.
int environment_number(const char* name);

// What a trace's name is made of: the process's pid, its rank (nullptr: none) and its machine's name.
struct TraceName {
    int pid;
    const char* rank;
    const char* host;
};

// Expands `pattern` into `out`: "%p" = pid, "%r" = "rank<rank>." (nothing without a rank), "%h" = the host
// with any character but letters, digits, '-', '_' and '.' made '_' (the machine's name, so that the
// machines of a job can write into one shared directory), "%%" = "%". False when it does not fit.
bool expand_output_pattern(const char* pattern, const TraceName& name, char* out, unsigned long capacity);

} // namespace gpuleak
