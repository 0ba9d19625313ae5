// The host memory of this process as the kernel counts it, and of the memory cgroup and the machine it
// runs in: what the OOM killer weighs. Read from /proc and the cgroup file system into fixed buffers,
// with no heap memory, by the sampler's thread.
#pragma once

#include <cstddef>
#include <cstdint>

#include "gpuleak/trace_format.h"

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

class HostMemoryReader {
  public:
    // Finds this process's memory cgroup.
    void open();
    // Fills `sample` and `rss` (VmRSS). USS and PSS take a walk over the process's page tables, whose
    // cost grows with its memory (8 ms for 250 MiB on a VM): they are read again only when the
    // reading's share of the time since the last one stays within kProportionalBudget, and carried over
    // otherwise; and for the `last` sample of the process (at exit), which nothing follows, unless the
    // last reading took more than kMostLastProportionalNs (an exit is not held up for it).
    void read(format::HostSample& sample, uint64_t& rss, uint64_t now_ns, bool last);

    // Of one core: the 1 % per process that sampling may take (bench/host_sampling.sh), less what the
    // rest of a sample takes (0.24 % at the default interval on this project's VM, waking up included).
    static constexpr double kProportionalBudget = 0.005;
    // An exit waits for a reading that took at most this long (about 5 GiB of resident memory here).
    static constexpr uint64_t kMostLastProportionalNs = 250'000'000;

  private:
    CgroupFiles cgroup_{};
    bool has_cgroup_ = false;
    uint64_t proportional_due_ns_ = 0;
    uint64_t proportional_cost_ns_ = 0;
    uint64_t uss_ = 0;
    uint64_t pss_ = 0;
    uint64_t proportional_time_ns_ = 0;
    bool has_proportional_ = false;
};

} // namespace gpuleak
