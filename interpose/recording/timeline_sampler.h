// The timeline: totals by kind and device plus the process's host memory, sampled by a background thread. The
// array is fixed; when it fills, every other sample is dropped and the interval doubles, so that it always
// covers the whole run.
#pragma once

#include <atomic>
#include <cstdint>

#include "recording/host_memory_reader.h"
#include "recording/spin_lock.h"
#include "recording/trace_writer.h"

namespace gpuleak {

// How a trace begins, which decides how its first sample is taken.
enum class TraceStart {
    FirstEvent,   // at the process's first CUDA call: here, before the event is accounted
    Attach,       // when gpuleak attach began recording a running process: here, as for FirstEvent
    ProcessStart, // as a Python program starts, for its host memory: by the thread, once it runs
    // In a forked child, inside fork(): a Fork sample here, the baseline of what the child goes on to hold
    // however soon it works, and a whole one by the thread at once (reading USS walks the page tables of
    // everything the child shares with its parent, too long to hold up fork()).
    Fork,
};

class TimelineSampler {
  public:
    // Starts the sampling thread for this process's trace; the thread calls `on_wake` after each of its
    // samples, and each sample holds what `python_modules` counts.
    void start(TraceWriter& writer, void (*on_wake)(), uint64_t (*python_modules)(), TraceStart how);
    // Takes one sample now. Thread-safe. What is read depends on the moment (HostMemoryReader::read);
    // at Exit the sample is skipped when one is being taken already (a signal handler that exits,
    // interrupting one on its own thread).
    void sample_now(SampleMoment moment = SampleMoment::Periodic);
    // Runs `change` with no sample being taken (the writer moves the mapping under the sampler).
    template <class Change> void without_samples(Change&& change) {
        SpinGuard guard(lock_);
        change();
    }
    // In a forked child the thread does not exist; forget it and the parent's trace.
    void forget_after_fork();
    // Recording stops while the process goes on (gpuleak attach detached): no sample is taken from now
    // on, and the thread ends at its next wake, also where start() made another since.
    void stop();

  private:
    static void* run(void* self);
    void thin();

    TraceWriter* writer_ = nullptr;
    void (*on_wake_)() = nullptr;
    uint64_t (*python_modules_)() = nullptr;
    // A sample read sys.modules: the interpreter was found, and reading it again takes no lock.
    std::atomic<bool> python_modules_read_{false};
    bool first_on_thread_ = false;
    bool running_ = false; // the thread has set itself up
    // One more at each start and stop: a thread whose start's generation has passed ends.
    uint64_t generation_ = 0;
    uint64_t stored_ = 0;
    HostMemoryReader host_;
    SpinLock lock_;
};

} // namespace gpuleak
