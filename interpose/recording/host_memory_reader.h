// The host memory of this process as the kernel counts it, and of the memory cgroup and the machine it
// runs in: what the OOM killer weighs. Read from /proc and the cgroup file system into fixed buffers,
// with no heap memory, by the sampler's thread.
#pragma once

#include <cstddef>
#include <cstdint>

#include "gpuleak/trace_format.h"
#include "recording/spin_lock.h"

namespace gpuleak {

// The value of `key` in a line "key value" (memory.stat); false when absent.
bool stat_field(const char* text, const char* key, uint64_t& value);

// The value of `key` (a line "key:   1234 kB") in the text of a /proc file, in bytes; false when absent.
bool proc_field_bytes(const char* text, const char* key, uint64_t& bytes);

// The memory cgroup's usage and limit files of this process, from the text of /proc/self/cgroup, under
// `root` (the cgroup file system's mount point): cgroup v2's memory.current and memory.max where they
// are, else v1's memory.usage_in_bytes and memory.limit_in_bytes; in a cgroup namespace (a container),
// where the text names the host's path and the mount shows only ours, those at the top. Of the cgroup
// and its ancestors, those of the one with the least limit. False when there are none.
struct CgroupFiles {
    char usage[512];
    char limit[512];
    char stat[512];                // its memory.stat
    const char* inactive_file_key; // the line of memory.stat with the page cache reclaimed first
};
bool find_cgroup_memory_files(const char* proc_self_cgroup, const char* root, CgroupFiles& files);

// The machine's memory (MemTotal); 0 when unknown.
uint64_t machine_memory_bytes();

// A reading whose cost grows with what it walks: taken again once the time since the last one makes
// that one's cost (this thread's CPU time) `budget` of it.
class PacedReading {
  public:
    explicit constexpr PacedReading(double budget) : budget_(budget) {}
    [[nodiscard]] bool due(uint64_t now_ns) const { return now_ns >= due_ns_; }
    [[nodiscard]] uint64_t last_cost_ns() const { return cost_ns_; }
    template <class Read> void take(uint64_t now_ns, Read&& read) {
        const uint64_t before = thread_cpu_ns();
        read();
        cost_ns_ = thread_cpu_ns() - before;
        due_ns_ = now_ns + static_cast<uint64_t>(static_cast<double>(cost_ns_) / budget_);
    }

  private:
    static uint64_t thread_cpu_ns();
    double budget_;
    uint64_t due_ns_ = 0;
    uint64_t cost_ns_ = 0;
};

// When a sample is taken: on the sampler's schedule (or the first, as a trace starts), as the image is
// replaced by another (exec: perhaps from a signal handler, perhaps one of several tried along PATH), or
// as the process exits (perhaps from a signal handler too).
// Fork: a forked child's first sample, taken inside fork(), which reads neither what walks the memory it
// shares with its parent (USS, PSS) nor the simulated device (whose locks a thread of the parent may have
// held as it forked).
enum class SampleMoment { Fork, Periodic, Exec, Exit };

// The simulated device's reading of its resident device memory (gpuleak_sim_device_resident_bytes),
// once the module map has found the simulated driver; SIZE_MAX when it could not be read then.
using SimulatedResidency = std::size_t (*)();
void set_simulated_residency(SimulatedResidency reader);

class HostMemoryReader {
  public:
    // Finds this process's memory cgroup.
    void open();
    // Fills `sample` and `rss` (VmRSS). USS and PSS take a walk over the process's page tables, whose
    // cost grows with its memory (8 ms for 250 MiB on a VM): they are read again only within
    // kProportionalBudget, and carried over otherwise; and at Exit, which nothing follows, unless the
    // last reading took more than kMostLastProportionalNs (an exit is not held up for it). The heap's free
    // memory is that of the latest read_heap.
    void read(format::HostSample& sample, uint64_t& rss, uint64_t now_ns, SampleMoment moment);
    // Reads the free memory malloc keeps, when due within kHeapBudget and no other thread is reading
    // it. It takes a walk over malloc's free lists (5 us for a training loop's, 40 ms for 260,000 free
    // blocks) with each of its arenas locked: never under a lock that a thread inside malloc may wait
    // for (an exec or an exit from a signal handler that interrupted it), and never from one.
    void read_heap(uint64_t now_ns);

    // Of one core: the 1 % per process that sampling may take (bench/host_sampling.sh), less what the
    // rest of a sample takes (0.24 % at the default interval on this project's VM, waking up included).
    static constexpr double kProportionalBudget = 0.005;
    static constexpr double kHeapBudget = 0.001;
    // An exit waits for a reading that took at most this long (about 5 GiB of resident memory here).
    static constexpr uint64_t kMostLastProportionalNs = 250'000'000;

  private:
    CgroupFiles cgroup_{};
    bool has_cgroup_ = false;
    PacedReading proportional_{kProportionalBudget};
    uint64_t uss_ = 0;
    uint64_t pss_ = 0;
    uint64_t proportional_time_ns_ = 0;
    bool has_proportional_ = false;
    SpinLock heap_lock_;
    PacedReading heap_{kHeapBudget};
    uint64_t heap_free_ = 0;
    uint64_t heap_time_ns_ = 0;                // 0 until read
    uint64_t simulated_resident_ = UINT64_MAX; // the latest reading; UINT64_MAX until one
};

} // namespace gpuleak
