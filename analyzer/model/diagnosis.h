// The verdict: what kind of memory problem a process has and the quantities it rests on, as facts
// (diagnosis_text.h phrases them). Reads only the process model.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "model/process_model.h"

namespace gpuleak::analyzer {

// Incomplete: nothing else was found, but data was lost that a leak may hide in (Exactness::lost).
// PoolExhausted: the program ran out of memory inside a framework's own pool, with nothing outside it
// growing.
enum class DiagnosisKind {
    Leak,
    CacheGrowth,
    OutsideAllocators,
    HostRamGrowth,
    PoolExhausted,
    Incomplete,
    Stable
};

const char* diagnosis_kind_name(DiagnosisKind kind); // the JSON names: "leak", "cache_growth", ...

// Where the top growing site would take its device at the rate it grew.
struct FillEstimate {
    int device = 0;
    uint64_t free_bytes = 0; // the least free memory the driver reported on it
    double seconds = 0;      // at the site's bytes per second
    double allocations = 0;  // at the site's bytes per allocation
};

enum class LeakCause {
    Growth, // memory the program holds kept growing (ProcessModel::growth_sites)
    // A kept tensor's autograd graph joins the graphs of many backward passes, which can never be used
    // again (ProcessModel::spent_graphs): a running total of losses, growing each step in host memory.
    SpentGraphs,
    // As the program ended, an autograd graph that no backward() could use any more kept the tensors it
    // saved for one (ProcessModel::kept_for_backward): outputs of forward passes kept with their graph,
    // where they were meant to be computed under torch.no_grad().
    KeptForBackward,
};
// The JSON names, which are also those of the lists of their sites: "growth", "spent_graphs",
// "kept_for_backward".
const char* leak_cause_name(LeakCause cause);

struct LeakFacts {
    LeakCause cause = LeakCause::Growth;
    // Into leak_sites, largest first: ProcessModel::growth_sites, or the sites of spent_graphs (the most
    // passes first) or of kept_for_backward.
    std::vector<size_t> sites;
    // Held by them at the end; for KeptForBackward, so held; for SpentGraphs, the kept tensors' own.
    uint64_t bytes = 0;
    std::optional<FillEstimate> fill; // growth only
};

// Reserved memory the caching allocator holds beyond what the program ever needed at once.
struct CacheFacts {
    int device = 0;
    uint64_t peak_allocated = 0;
    uint64_t final_allocated = 0;
    uint64_t peak_reserved = 0;
    uint64_t final_reserved = 0;
};

struct OutsideFacts {
    int device = 0;
    uint64_t used_by_driver = 0; // the most in use per the driver
    uint64_t obtained = 0;       // the most reserved through the calls gpuleak sees
};

// What made the process's host memory grow, told by which of its figures grew together.
enum class HostGrowthCause {
    // Its unique memory (USS) grew while its resident memory (RSS) did not, or much less: pages it
    // shared with the parent it was forked from became its own as it wrote to them (reference counts
    // written on Python objects it only reads).
    CopyOnWrite,
    Allocations,  // RSS and USS grew together: the process allocated and kept it
    SharedMemory, // its resident shared memory (/dev/shm, shared-memory tensors) grew
};

const char* host_growth_cause_name(HostGrowthCause cause); // "copy_on_write", "allocations", ...

// Host memory that grew through the process's life, from `from` (its start, or its first event for a
// program that loads before it works) to `to` (the last sample of its own code), and went on growing in
// the second half of that stretch.
struct HostRamFacts {
    HostGrowthCause cause = HostGrowthCause::Allocations;
    HostPoint from;
    HostPoint to;
    uint64_t growth = 0; // of USS (copy-on-write), RSS (allocations) or resident shared memory
    // What the measure also rose by while the process imported modules, which is not counted in growth;
    // 0 when that is a small part of it.
    uint64_t while_importing = 0;
    bool before_finalizing = false; // `to` is the last sample before Python finalized
};

// A process killed without a word of its own: it left no end record (killed by SIGKILL, which the kernel's
// OOM killer sends when memory runs out, or still running when the report was made), or the launcher
// wrote its SIGKILL. Its last host sample, and the process of the
// run that held the most resident memory at that moment (perhaps itself).
struct KilledFacts {
    HostPoint last;
    int32_t largest_pid = 0;
    uint64_t largest_rss = 0;
    ProcessRole largest_role;
};

// The run came near what the OOM killer weighs: its memory cgroup's usage against its limit, or where
// none was read the machine's memory in use against its total. Said of the process with the most
// resident memory at that moment: the one the OOM killer picks first.
struct MemoryPressureFacts {
    uint64_t time_ns = 0; // since this process's start
    bool cgroup = false;  // the cgroup's limit; false: the machine's memory
    uint64_t used = 0;
    uint64_t limit = 0;
    uint64_t rss = 0; // this process's then
};

// The run's memory at its fullest: of every process's samples, the one where the memory cgroup's usage
// stood highest against its limit (where no limit was read, the machine's memory in use against its
// total, which counts every process of the machine), and the process of the run with the most resident
// memory at that moment.
struct RunMemoryFacts {
    bool cgroup = false; // the cgroup's limit; false: the machine's memory
    uint64_t used = 0;
    uint64_t limit = 0;
    uint64_t run_time_ns = 0; // since the first process of the run on that machine started
    int32_t largest_pid = 0;
    ProcessRole largest_role;
    uint64_t largest_rss = 0;
};

// A framework's own pool (LeakSite::pool), over its sites: what it reserved, which the device figures
// count whole, though it hands out its arrays inside it out of CUDA's sight. Never a leak or cache growth.
struct PoolFacts {
    PoolOwner owner = PoolOwner::None; // its largest site's
    int device = 0;                    // its largest site's
    uint64_t bytes = 0;                // live as the program's code ended
    uint64_t regions = 0;              // the allocations it is made of
    uint64_t first_ns = 0;             // when its oldest region was made, since the start
    uint64_t last_ns = 0;              // its youngest
    std::optional<uint64_t> capacity;  // the device's, where the driver was asked
    // Regions were made through the program's work, as a leak's allocations are (LeakSite::growing):
    // what it holds inside grew.
    bool grew_through_work = false;
};

// How a framework allocated its device memory, told by the frames of its allocations: a pool reserved
// at once (XLA's preallocation, TensorFlow's default), a pool grown in regions as its arrays need
// (TensorFlow's memory growth, XLA without preallocation), or each tensor as an allocation of its own
// (TensorFlow's cuda_malloc_async).
enum class AllocatorMode : uint8_t { Pool, GrowingPool, PerTensor };
const char* allocator_mode_name(AllocatorMode mode); // the JSON names: "pool", "growing_pool", "per_tensor"

struct AllocatorFacts {
    PoolOwner framework = PoolOwner::None;
    AllocatorMode mode = AllocatorMode::Pool;
    // TensorFlow ran steps XLA compiled (Keras compiles them so by default), which take their memory
    // from the same allocator.
    bool xla = false;
};

struct Diagnosis {
    DiagnosisKind kind = DiagnosisKind::Stable;
    // Over all devices.
    uint64_t peak_allocated = 0;
    uint64_t final_allocated = 0;
    uint64_t final_reserved = 0;
    std::optional<LeakFacts> leak;           // kind Leak
    std::optional<CacheFacts> cache;         // kind CacheGrowth
    std::optional<OutsideFacts> outside;     // kind OutsideAllocators
    std::optional<AllocatorFacts> allocator; // where a framework's allocator is recognised
    // Host memory growth, beside whatever the GPU verdict is (kind HostRamGrowth when it is the only one).
    std::optional<HostRamFacts> host_ram;
    std::optional<KilledFacts> killed;           // diagnose_run
    std::optional<MemoryPressureFacts> pressure; // diagnose_run
    // diagnose_run: the run's, the same in each of its processes' diagnoses; empty when no process read
    // its cgroup's limit or the machine's available memory.
    std::optional<RunMemoryFacts> run_memory;
    // Cached bytes worth a mention in a verdict that is not about them.
    uint64_t cached_at_end = 0;
    std::optional<PoolFacts> pool; // beside whatever the verdict is
    // The out-of-memory failure with the largest request: an index into model.failures.
    std::optional<size_t> largest_failure;
    // With a leak, of what was live when that failure came, what the leak's sites held then: the memory
    // the program's earlier work had kept.
    uint64_t failure_held_by_leak = 0;
};

Diagnosis diagnose(const ProcessModel& model);

// What needs the run's other processes: for a process killed, which held the most memory then; for the
// run, its memory at its fullest and whether it came near its limit (at least 90 % of it).
// `diagnoses[i]` is models[i]'s.
void diagnose_run(const std::vector<const ProcessModel*>& models, const std::vector<Diagnosis*>& diagnoses);

// The process was killed by a signal it could not record (SIGKILL): no end record, and not running when
// the trace was opened; or the launcher wrote its SIGKILL.
[[nodiscard]] bool killed_unseen(const ProcessEnd& end);

} // namespace gpuleak::analyzer
