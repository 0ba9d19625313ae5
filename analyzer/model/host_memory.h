// A process's host memory over its life (the timeline's host samples) and who the process is among the
// processes of a run: a DataLoader worker, a spawned child, a distributed rank.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "read/trace_reader.h"

namespace gpuleak::analyzer {

// One host sample (format::HostSample), its time since the process's start. On the simulated device,
// whose device memory is host memory of the process, without it: the figures are what a real device
// would leave in host memory (simulated_device_bytes says how much was taken off RSS, RssAnon, USS
// and PSS).
struct HostPoint {
    uint64_t time_ns = 0;
    uint64_t events = 0; // the process's events before it
    uint64_t rss = 0;
    format::HostSample sample{};
    uint64_t simulated_device_bytes = 0;
    uint64_t python_modules = 0; // sys.modules' size; 0 when unknown
    [[nodiscard]] bool has(format::HostField field) const {
        return (sample.fields & static_cast<uint32_t>(field)) != 0;
    }
    // What the process allocated and holds: its anonymous memory, resident and swapped, less the free
    // memory malloc keeps for reuse where it was read (the blocks a loop frees stay in the heap, and
    // the heap grows until they are reused however little the program keeps).
    [[nodiscard]] uint64_t allocated() const {
        const uint64_t anonymous = sample.rss_anon + sample.swap;
        const uint64_t free = has(format::HostField::HeapFree) ? sample.heap_free : 0;
        return anonymous > free ? anonymous - free : 0;
    }
};

struct HostMemory {
    std::vector<HostPoint> points; // oldest first
    uint64_t peak_rss = 0;
    std::optional<uint64_t> peak_uss;
    std::optional<uint64_t> peak_pss;
    std::optional<uint64_t> peak_shmem;
    std::optional<uint64_t> peak_swap;
    // The memory cgroup: its limit and the most it held at a sample; the machine's least available memory.
    std::optional<uint64_t> cgroup_limit;
    std::optional<uint64_t> peak_cgroup;
    std::optional<uint64_t> lowest_available;

    [[nodiscard]] const HostPoint* first() const { return points.empty() ? nullptr : &points.front(); }
    [[nodiscard]] const HostPoint* last() const { return points.empty() ? nullptr : &points.back(); }
};

HostMemory build_host_memory(const TraceReader& trace);

struct ForkRecord {
    int32_t child_pid = 0;
    uint64_t monotonic_ns = 0; // CLOCK_MONOTONIC, comparable across the processes of a machine
    uint32_t stack_id = 0;     // 0 in a host-only trace
    format::ForkOrigin origin = format::ForkOrigin::Unknown;
};

std::vector<ForkRecord> fork_records(const TraceReader& trace);

enum class RoleKind {
    Program,          // its command line says what it is
    DataLoaderWorker, // started by a torch DataLoader
    ForkedWorker,     // forked by multiprocessing (a Pool, a Process), or by its fork server
    ForkedChild,      // forked, from elsewhere
    SpawnedChild,     // started by multiprocessing's spawn: a new interpreter
    ResourceTracker,  // multiprocessing's helper that unlinks what its children leave behind
    ForkServer,       // multiprocessing's forkserver, which forks the forkserver method's children
    Rank,             // a distributed launcher's rank
};

const char* role_kind_name(RoleKind kind); // the JSON names: "program", "dataloader_worker", ...

// How a multiprocessing child (a DataLoader's worker among them) came to be.
enum class StartMethod {
    Unknown,
    Fork,       // a copy of its parent
    Spawn,      // a new interpreter its parent started
    Forkserver, // a copy of multiprocessing's fork server
};

const char* start_method_name(StartMethod method); // "fork", "spawn", "forkserver"; null when unknown

struct ProcessRole {
    RoleKind kind = RoleKind::Program;
    // A DataLoader worker's: read from its own frames (ProcessTarget), else told by the order its siblings
    // were started in.
    std::optional<int> worker_id;
    StartMethod start_method = StartMethod::Unknown;
    // Of a rank: its rank, its number on its machine and the job's ranks (the distributed launcher's RANK,
    // LOCAL_RANK and WORLD_SIZE, else Slurm's task, local task and tasks); -1 where unknown.
    int rank = -1;
    int local_rank = -1;
    int world_size = -1;
    int node_rank = -1;           // of any process: its machine's rank in the job (GROUP_RANK, SLURM_NODEID)
    std::optional<size_t> parent; // its parent's index among the processes assign_roles was given
    uint32_t start_stack_id = 0;  // in the parent's trace: where the parent started it (0: not recorded)
};

} // namespace gpuleak::analyzer
