// The timeline: totals by kind and device plus host RSS, sampled by a background thread. The array is
// fixed; when it fills, every other sample is dropped and the interval doubles, so that it always
// covers the whole run.
#pragma once

#include <cstdint>

#include "spin_lock.h"
#include "trace_writer.h"

namespace gpuleak {

class TimelineSampler {
  public:
    // Starts the sampling thread for this process's trace; the thread calls `on_wake` after each of its
    // samples.
    void start(TraceWriter& writer, void (*on_wake)());
    // Takes one sample now (also at exit). Thread-safe.
    void sample_now();
    // In a forked child the thread does not exist; forget it and the parent's trace.
    void forget_after_fork();

  private:
    static void* run(void* self);
    void thin();

    TraceWriter* writer_ = nullptr;
    void (*on_wake_)() = nullptr;
    uint64_t stored_ = 0;
    SpinLock lock_;
};

} // namespace gpuleak
