// What one process's trace says, computed once from the decoded trace: totals over time, the live
// set at the end grouped by the site that made it (its call stack, or its Python stack), failures with
// what was live at that moment. Everything the diagnosis and the renderers show comes from here; they
// read no trace themselves.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "model/host_memory.h"
#include "read/trace_reader.h"

namespace gpuleak::analyzer {

inline double seconds_of(uint64_t nanoseconds) {
    return static_cast<double>(nanoseconds) / 1e9;
}

// A time of the trace's clock as the time since the process's trace started.
inline uint64_t since_start(uint64_t time_ns, const TraceHeader& header) {
    return time_ns > header.start_monotonic_ns ? time_ns - header.start_monotonic_ns : 0;
}

// Kinds whose bytes were obtained from CUDA as device memory: what "reserved" counts.
bool counts_as_reserved(format::MemoryKind kind);

struct DevicePoint {
    uint64_t time_ns = 0; // since the process's trace started
    uint64_t reserved = 0;
    uint64_t allocated = 0;
};

struct DriverUsedPoint {
    uint64_t time_ns = 0;
    uint64_t bytes = 0;
};

struct DeviceSummary {
    int device = 0;
    uint64_t peak_reserved = 0;
    uint64_t final_reserved = 0;
    uint64_t peak_allocated = 0;
    uint64_t final_allocated = 0;
    // The driver's view, when it was asked: total memory, the lowest free seen, and so the most in use
    // per the driver (contexts, other libraries and other processes included).
    std::optional<uint64_t> capacity;
    std::optional<uint64_t> lowest_free;
    std::optional<uint64_t> peak_used_by_driver;
    // The device's reserved and allocated bytes over the run (where it held all of the process's device
    // memory, the process's timeline; else its own, thinned by time, TimeThinner), and what its driver said
    // was used (the whole device's: contexts, other libraries and other processes too) when asked, thinned
    // by time; oldest first.
    std::vector<DevicePoint> timeline;
    std::vector<DriverUsedPoint> driver_used;
    // Reserved but not allocated at the end: what a caching allocator keeps cached there.
    [[nodiscard]] uint64_t cached() const {
        return final_reserved > final_allocated ? final_reserved - final_allocated : 0;
    }
};

// A context the process made on a device (EventType::Context): a context takes device memory of its own,
// hundreds of MiB on a real GPU, which no allocation counts.
struct DeviceContext {
    int device = 0;
    uint64_t time_ns = 0; // since the process's trace started
    uint32_t stack_id = 0;
    // "GPU-..." as nvidia-smi writes it, the same device in every process whatever its ordinal there;
    // empty where the driver did not say.
    std::string uuid;
};

struct Marker {
    uint64_t time_ns = 0; // since the process's trace started
    std::string label;
};

// Where one of a site's live allocations is: what gpuleak.why() finds the program's objects by.
struct LiveBlock {
    uint64_t address = 0;
    uint64_t size = 0;
    bool operator==(const LiveBlock&) const = default;
};

// One of a site's holders: Retainer `holder` of RetainerSnapshot `snapshot` (ProcessModel::retainers) held
// `bytes` of it, its share `share` (Retainer::sites).
struct HeldBy {
    size_t snapshot = 0;
    size_t holder = 0;
    size_t share = 0;
    uint64_t bytes = 0;
};

// Live allocations at the end of one kind made at one site (site_keys.h): by one call stack, or by one
// Python stack.

// A framework whose own allocator reserves device memory as a pool and hands out its arrays inside it,
// out of CUDA's sight (the BFC allocator of XLA and TensorFlow).
enum class PoolOwner : uint8_t { None, Jax, TensorFlow, Unknown };

const char* pool_owner_name(PoolOwner owner); // the JSON names: "jax", "tensorflow", "unknown"

struct LeakSite {
    uint32_t stack_id = 0; // of the site's stacks, the one that holds the most bytes: the one shown
    format::MemoryKind kind = format::MemoryKind::None;
    int device = 0; // where most of its bytes are
    uint64_t bytes = 0;
    uint64_t count = 0;
    // Of count, those the trace counts by site only (they had no live slot of their own): first_ns and
    // last_ns are then bounds, the first and the latest allocation spilled there.
    uint64_t spilled = 0;
    // Of bytes, what the program's code left live and its exit freed after it ended (ProcessModel::
    // code_end_ns): atexit handlers (JAX frees every array in one) or the interpreter's finalization.
    uint64_t freed_at_exit = 0;
    uint64_t first_ns = 0; // allocation time of the oldest survivor, since the start
    uint64_t last_ns = 0;  // of the youngest
    // The share of the program's events (ProcessModel::program_events) made between the oldest and the
    // youngest survivor the program's code made: how much of its work they were made through, whatever
    // the time each step took.
    double program_share = 0;
    // The events (of program_events) of that oldest and youngest survivor; {0, 0} where none was the
    // program code's.
    std::pair<uint64_t, uint64_t> program_events;
    // Index in markers() of the marker interval of the oldest and youngest survivor: -1 is before the
    // first marker. Absent when the process set no markers.
    std::optional<std::pair<int, int>> marker_range;
    // Device memory a sub-allocator reserved where it reports its blocks (PyTorch's segments): what
    // its cache holds for the blocks, not what the program holds.
    bool segments = false;
    // What was live when gpuleak attach began recording, listed then (format::kBeforeAttachApi): its
    // time is the attach's and it has no stack, so nothing is known of what made it.
    bool before_attach = false;
    // A framework's own pool, set by mark_framework_allocators: what it reserved, not what the program
    // holds.
    PoolOwner pool = PoolOwner::None;
    // A framework's pool of device memory: the framework's pinned host pools (TensorFlow's for its copies)
    // are its own concern, not the device's.
    [[nodiscard]] bool device_pool() const {
        return pool != PoolOwner::None && format::occupies_device_memory(kind);
    }
    // Its survivors are spread over the program's markers' intervals or over its events (kGrowthShare in
    // process_model.cpp), whether or not repetitions of its work were seen between them.
    bool spread_over_work = false;
    // Survivors made through the program's work (a leak), as opposed to once (weights, a warm-up, a
    // workspace, however much of the program that was): spread over its markers' intervals, or over its
    // events and across repetitions of its work (repetition.h), or over its events and held by a
    // gpuleak.why() holder that accumulates them (retainers.h); and not held as one model's or
    // optimizer's working set (retainers.h).
    bool growing = false;
    double bytes_per_second = 0;          // over the time its survivors were made in
    double bytes_per_marker_interval = 0; // when there are markers
    // Its live allocations with a slot of their own, by address; physical memory (VmmPhysical) where it is
    // mapped, the address the program's objects hold (its handle where it is mapped nowhere).
    std::vector<LiveBlock> blocks;
    // What held it, most first, per the latest record of what held the memory (gpuleak.why()) that names
    // the site; empty without one, or where that record found nothing holding it.
    std::vector<HeldBy> held_by;
};

// What one site (site_keys.h) held of one kind at a moment of the run.
struct LiveSiteAt {
    uint32_t stack_id = 0;                              // as LeakSite's
    format::MemoryKind kind = format::MemoryKind::None; // None where kinds are not told apart (a failure's)
    uint64_t bytes = 0;
    uint64_t count = 0;
};

// What the program held when it set a marker, that build_model was asked about: its sites as the replay
// from the end found them, after every event up to the marker's time.
struct Moment {
    std::string label; // as asked
    // Of the first marker with that label, since the start; none when the process set no such marker.
    std::optional<uint64_t> time_ns;
    // The moment right after the ring's event of this sequence number, where it is known (the peak's):
    // events of the same time after it are not part of it.
    std::optional<uint64_t> after_sequence;
    // The ring reached back to it: `sites` holds what was live then. Not where the ring wrapped after it.
    bool reached = false;
    std::vector<LiveSiteAt> sites; // of what the program holds (program_holds), most bytes first
};

struct FailureSummary {
    uint64_t bytes = 0; // requested
    // The CUDA error of the failed call; format::kAllocatorRefused when a sub-allocator refused a
    // block and no CUDA allocation failed.
    int32_t error = 0;
    // A sub-allocator refused a block (gpuleak_block_alloc_failed): the failed CUDA allocations it gave
    // up after, if any, are this failure too and not listed apart.
    bool allocator_refused = false;
    uint64_t failed_cuda_allocations = 1; // how many failed CUDA calls this out-of-memory error took
    std::optional<uint64_t> free_bytes;   // the device's free memory then
    int device = 0;
    format::MemoryKind kind = format::MemoryKind::None;
    uint64_t time_ns = 0;
    uint32_t stack_id = 0;
    uint32_t thread_id = 0;
    // Reserved bytes on that device when it failed, and the largest live sites then; absent when the
    // event ring no longer reaches back to that moment.
    std::optional<uint64_t> reserved_then;
    std::vector<LiveSiteAt> top_sites_then;
    // What held the memory then, as gpuleak.why() found it before the error reached the program: an index
    // into ProcessModel::retainers.
    std::optional<size_t> retainers;
    // Memory ran out (cudaErrorMemoryAllocation, CUDA_ERROR_OUT_OF_MEMORY: 2 in both APIs), or a
    // sub-allocator refused: not a bad argument, a missing driver or a context gone.
    [[nodiscard]] bool out_of_memory() const { return allocator_refused || error == kOutOfMemoryError; }
    static constexpr int32_t kOutOfMemoryError = 2;
};

struct TimelinePoint {
    uint64_t time_ns = 0;
    uint64_t reserved = 0;  // all devices
    uint64_t allocated = 0; // all devices
    std::optional<uint64_t> rss;
    // At a sample, once the driver was asked about a device: what it said was used, summed over those
    // devices (see DeviceSummary::driver_used).
    std::optional<uint64_t> driver_used;
};

struct SpilledCount {
    uint64_t count = 0;
    uint64_t bytes = 0;
};

// What makes the figures of a process less than exact. The renderers say it beside the figures.
struct Exactness {
    // Allocations gpuleak could not record at all (no memory left for them): the totals, the sites and
    // the timeline are short by them, and their frees were unknown frees.
    uint64_t untracked = 0;
    // Live at the end without a live slot of their own, by kind: in the totals and their sites exactly,
    // with their stretch of the run for their times, but not one by one (no address, so not in a
    // snapshot export). Kind None: those whose site found no record, in the totals but in no site and
    // not in the timeline. A caching allocator's blocks lie in its segments: their bytes do not add up.
    std::map<format::MemoryKind, SpilledCount> spilled_by_kind;
    uint64_t live_capacity = 0; // the live slots the trace had
    // Call stacks that did not fit in the trace: their allocations are at a site without a stack.
    uint64_t stacks_dropped = 0;
    // Failures, markers, forks and notebook cells the trace had no room for.
    uint64_t notable_dropped = 0;
    // Marker labels, notebook cells' sources and records of what held the memory whose text did not fit
    // in the trace's strings (those records also stop at half of it).
    uint64_t strings_dropped = 0;
    // Events the C API was asked for from a signal handler that interrupted gpuleak on its thread: dropped.
    // Allocations, frees and failures, which the totals and the sites may be off by; then markers, source
    // names and forks, which only the markers and names are short of.
    uint64_t reentry_dropped = 0;
    uint64_t reentry_dropped_notes = 0;

    // Of every kind, and those whose site found no record.
    [[nodiscard]] SpilledCount spilled() const {
        SpilledCount total;
        for (const auto& [kind, of_kind] : spilled_by_kind) {
            total.count += of_kind.count;
            total.bytes += of_kind.bytes;
        }
        return total;
    }
    [[nodiscard]] SpilledCount unattributed() const {
        const auto found = spilled_by_kind.find(format::MemoryKind::None);
        return found == spilled_by_kind.end() ? SpilledCount{} : found->second;
    }
    // Data was lost that a leak may hide in.
    [[nodiscard]] bool lost() const {
        return untracked > 0 || unattributed().count > 0 || reentry_dropped > 0;
    }
};

// A site that a record of what held the memory names: the stack and kind gpuleak.why() searched, and the
// leak site of the end that is the same site (site_keys.h), where there is one.
struct RetainedSite {
    uint32_t stack_id = 0;
    format::MemoryKind kind = format::MemoryKind::None;
    uint64_t bytes = 0; // live then
    std::optional<size_t> leak_site;
};

// Bytes of one of RetainerSnapshot::sites, and for a holder's the chain to its largest storage there.
struct SiteShare {
    size_t site = 0;
    uint64_t bytes = 0;
    std::string path;
};

// The autograd graphs of the tensors a holder kept, as gpuleak.why() read them.
struct KeptGraph {
    std::string path; // to the tensor whose graph joins the most passes, as Python spells it: "running_loss"
    uint64_t nodes = 0;
    // The separate forward passes they join, whose nodes still hold what they saved (one per batch for a
    // validation set's outputs kept), and those backward() already ran through (one per step for a running
    // total of losses), which can never be used again.
    uint64_t passes = 0;
    uint64_t spent_passes = 0;
    uint64_t address = 0; // of that tensor's storage on the device or in pinned memory; 0 elsewhere
    uint64_t bytes = 0;
    // Of spent_passes, those that tensor joins by itself: all of them for a running total (a chain of
    // sums), one for each of a list of losses kept one by one. spent_passes in the documents of packages
    // that did not say.
    uint64_t spent_by_one = 0;
};

// One root of the program and what it held of the sites' memory, in gpuleak.why()'s words.
struct Retainer {
    std::string root; // "`losses`, a list in __main__ with 60 items"
    std::string kind; // "global", "local", "traceback", "module"
    uint64_t bytes = 0;
    uint64_t tensors = 0;
    std::vector<SiteShare> sites;
    std::string path; // the chain to its largest storage, as Python spells it: "losses[59]..."
    std::vector<std::string> through; // what the chains went through: "autograd graph", "view", ...
    // Of sites, what it held through tensors autograd saved for a backward pass (activations).
    std::vector<SiteShare> saved;
    std::optional<KeptGraph> graph; // where its tensors' graphs join two passes or more
    std::string own;                // PyTorch's own holders: "the parameters of a Net"
    // The class of the model or optimizer whose parameters, buffers, gradients or state it holds ("Net",
    // "Adam"), and how many models it holds where it is not one itself (a list of trials' models); empty
    // and 0 in the documents of packages that did not say.
    std::string owner;
    uint64_t models = 0;
    std::vector<std::string> advice; // what to change, where what it went through says
};

enum class RetainerMoment { OutOfMemory, PhaseEnd, Exit, OnDemand };

// The moment as gpuleak.why()'s document and the report's JSON name it: "out_of_memory", "phase_end",
// "exit", "on_demand".
const char* retainer_moment_name(RetainerMoment moment);

// What held the program's device memory at one moment, as gpuleak.why() found it in the process and
// recorded it (gpuleak_retainers): before an out-of-memory error reached the program, at a phase's end,
// as the program ended (atexit), or when the program asked.
struct RetainerSnapshot {
    uint64_t time_ns = 0; // since the start
    std::string label;    // "out of memory on device 0", "end of epoch 3", "gpuleak.why()"
    RetainerMoment moment = RetainerMoment::OnDemand;
    std::optional<int> device;     // of an out-of-memory error
    std::optional<size_t> failure; // the out-of-memory error it was taken at: into ProcessModel::failures
    double seconds = 0;            // the search took
    uint64_t objects = 0;          // searched
    bool stopped = false;          // the time limit ended the search
    std::string problem;           // why there is no answer; empty when there is one
    // The tensors autograd saved were read: not at a moment the program did not ask about where it had set
    // saved-tensor hooks, which reading them would have run.
    bool saved_tensors_read = true;
    std::vector<RetainedSite> sites;
    std::vector<Retainer> holders;    // most bytes first
    std::vector<SiteShare> unreached; // what no chain reached, most first
};

// A leak site that the record taken as the program ended found held through tensors autograd saved for a
// backward pass, by a holder whose graphs join kMinPasses forward passes or more: a graph that no backward()
// can use any more (the program is ending) kept them alive, the activations of forward passes run outside
// torch.no_grad() and kept.
struct KeptForBackward {
    size_t site = 0;     // into ProcessModel::leak_sites
    uint64_t bytes = 0;  // of it held so
    size_t snapshot = 0; // the record: into ProcessModel::retainers
    size_t holder = 0;   // the holder of most of those bytes: into its holders
};

// A holder whose tensors' autograd graphs join kMinSpentPasses backward passes or more, which backward()
// already ran through: a running total of losses (`total += loss`), whose graph grows each step in host
// memory and can never be used again. Its site is where the storage of its tensor that joins the most
// was made.
struct SpentGraph {
    size_t site = 0;     // into ProcessModel::leak_sites
    size_t snapshot = 0; // the record: into ProcessModel::retainers
    size_t holder = 0;   // into its holders: its graph
};

// The forward passes kept with what they saved that make a leak at the program's exit: the last step's
// one (its outputs left in a variable) is what a loop leaves; a validation set's batches are many.
constexpr uint64_t kMinPasses = 3;
// The spent passes that make a running total. One step's loss may sum a few passes that backward() ran
// through together (micro-batches, tasks, crops: indistinguishable in one record from as many steps),
// and a running total over fewer steps keeps little; what matters grows with the steps of an epoch.
constexpr uint64_t kMinSpentPasses = 16;

// The exception the Python program's code ended with, which no code caught (format::EventType::
// ProgramError): what ended a script that failed, the first thing its author wants to see. Or the one a
// notebook's cell ended with, which the kernel showed and outlived.
struct ProgramError {
    std::string type; // its class: "RuntimeError", "torch.OutOfMemoryError"
    std::string message;
    std::string cell; // the notebook's cell that raised it ("cell [12]"); empty for the program's end
    struct Frame {
        std::string file;
        uint32_t line = 0; // 0: unknown
        std::string function;
        std::string source_name; // what the program named its file ("cell [12]": named_sources.h), or empty
    };
    std::vector<Frame> frames; // its traceback, outermost first (the innermost 64)
    uint64_t time_ns = 0;      // when it was recorded, as the program ended, since the start
    // Into frames: the innermost of the program's own code (program_files.h), where the author's code
    // raised it or called what did; none where no frame is the program's.
    std::optional<size_t> program_frame;
    // The out-of-memory failure it reports (the error a framework raised as memory ran out), into
    // ProcessModel::failures: the latest before it.
    std::optional<size_t> failure;
};

struct ProcessModel {
    std::string path;
    TraceHeader header;
    uint64_t duration_ns = 0;
    // When the Python interpreter began finalizing, since the start: the end of the program's own code.
    // What follows (module teardown, libraries' shutdown) can take long against a short script, and
    // whether a site grew is judged on the events before it (program_events). What the program held is
    // what was live then: leak_sites count the allocations freed after it as live. Absent when it was not
    // recorded.
    std::optional<uint64_t> code_end_ns;
    // The program's events: those numbered below this were made by its own code (the ring's head when
    // Python began finalizing, else all the process's events).
    uint64_t program_events = 0;
    bool reports_blocks = false; // a sub-allocator reported blocks: allocated is told from reserved
    // Where the program's device work repeats (a loop's steps, each freeing what it made), the end of its
    // first step, since the start: what came before it (imports, a model's weights, a compile at the
    // first step) is set-up. Absent where no level of its allocated device memory was come back to often
    // enough in the events the ring holds.
    std::optional<uint64_t> first_step_end_ns;
    // The program's code freed blocks of its sub-allocator, which may keep them cached (or the ring no
    // longer holds its oldest events): otherwise what the allocator reserved beyond them is only the rest
    // of the segments it made for blocks still held.
    bool freed_blocks = false;
    std::vector<DeviceSummary> devices;
    std::vector<DeviceContext> contexts; // by device
    uint64_t peak_pinned_host = 0;
    uint64_t final_pinned_host = 0;
    uint64_t peak_managed = 0;
    uint64_t events = 0;
    uint64_t events_overwritten = 0;
    uint64_t failed_allocations = 0;
    HostMemory host;
    std::vector<ForkRecord> forks; // the children it forked, oldest first
    ProcessRole role;              // assign_roles, once every process of the run is modelled
    std::vector<Marker> markers;
    std::vector<LeakSite> leak_sites; // most bytes first
    // Indices into leak_sites of the growing ones that the program holds (not segments, not a framework's
    // pool), largest first.
    std::vector<size_t> growth_sites;
    // Set by mark_framework_allocators: TensorFlow made the memory of its tensors each by itself
    // (TF_GPU_ALLOCATOR=cuda_malloc_async), and ran steps XLA compiled.
    bool tensorflow_per_tensor = false;
    bool tensorflow_xla = false;
    // A framework's pool grew through the program's work: its regions, taken together, were made as a
    // growing site's survivors are (LeakSite::growing), or spread over its events as widely.
    bool pool_grew_through_work = false;
    std::vector<FailureSummary> failures;
    std::vector<RetainerSnapshot> retainers;        // oldest first
    std::vector<KeptForBackward> kept_for_backward; // the program's own sites (not segments), most first
    std::vector<SpentGraph> spent_graphs; // per the latest record without a problem, most passes first
    std::vector<TimelinePoint> timeline;
    std::vector<Moment> moments; // those asked for, in the order asked
    // With ModelDetail::Allocations: what the program held of its allocated device memory when that was
    // highest (the first moment of it); none where the ring no longer reaches back to it.
    std::optional<Moment> peak;
    // With ModelDetail::Allocations: the site (site_keys.h) of each stack of live_allocations,
    // spilled_allocations and ring_events, for a renderer that groups them as the model does without
    // symbolizing them.
    std::unordered_map<uint32_t, uint64_t> site_of_stack;
    // The stacks of live allocations and failures made on a thread whose start was recorded
    // (EventType::ThreadStart), each with the stack that started that thread: what a library's thread
    // (PyTorch's pin-memory thread) makes, the program's line that started it asked for.
    std::map<uint32_t, uint32_t> thread_start_stacks;
    // With ModelDetail::Allocations: every live allocation that had a slot of its own, those that had
    // none by site (with the stretches of the run they were made in), and the ring's events, oldest
    // first. Empty otherwise.
    std::vector<LiveAllocation> live_allocations;
    std::vector<SpilledSite> spilled_allocations;
    std::vector<Event> ring_events;
    std::optional<ProgramError> error;
    std::vector<ProgramError> cell_errors; // the notebook's cells that raised, oldest first
    Exactness exactness;
    std::vector<std::string> warnings; // the reader's, and the model's own
};

// The site (site_keys.h) of a stack of live_allocations, spilled_allocations or ring_events
// (ModelDetail::Allocations).
uint64_t site_of(const ProcessModel& model, uint32_t stack_id);

// The summary of the process's `device`; null where it held no memory there.
const DeviceSummary* device_summary(const ProcessModel& model, int device);

// The context the process made on `device`; null where it made none there (or its trace predates them).
const DeviceContext* context_on(const ProcessModel& model, int device);

// The devices the process reserved memory or made a context on, ascending.
std::vector<int> devices_used(const ProcessModel& model);

// Whether allocations of this kind are memory the program holds, as leak_sites counts it: not address
// space, and not the segments a sub-allocator that reports its blocks (LeakSite::segments) keeps them in.
bool program_holds(const ProcessModel& model, format::MemoryKind kind);

// What a model keeps of its trace: the summary the diagnosis and most renderers read, or also each live
// allocation and each event, for a renderer that places every one of them (the PyTorch snapshot).
enum class ModelDetail { Summary, Allocations };

// `moments`: the labels of markers whose live sites the model keeps (ProcessModel::moments).
ProcessModel build_model(const std::string& path, const TraceReader& trace,
                         ModelDetail detail = ModelDetail::Summary,
                         const std::vector<std::string>& moments = {});

// The last host sample of the program's own code: before code_end_ns, and for a Python program the last
// that read sys.modules (those after it were taken as it tore down). The sample at exit comes after the
// teardown freed what the program held. Null without samples.
const HostPoint* code_end_host_point(const ProcessModel& model);

// Who each process is, from its parent's forks and its own header: a DataLoader worker and its id, a
// spawned child, a rank.
void assign_roles(std::vector<ProcessModel*>& models);

// What the frames of an allocation's stack say of the framework allocator that made it (from symbols the
// model does not read: report/stack_view.h tells them).
struct AllocatorFrames {
    PoolOwner pool = PoolOwner::None;   // a BFC allocator growing its pool, and whose
    bool tensorflow_per_tensor = false; // TensorFlow's cuda_malloc_async allocator
    bool xla = false;                   // within a step that XLA compiled
};

// Marks the leak sites that are a framework's pool, as `frames_of` a site's stack tells, and takes them out
// of growth_sites: a pool holds whatever the framework hands out inside it, and how it grew says nothing
// of which line keeps what. Notes TensorFlow's allocator where it made each tensor by itself, and whether
// its steps were XLA's (ProcessModel::tensorflow_per_tensor, tensorflow_xla).
void mark_framework_allocators(ProcessModel& model,
                               const std::function<AllocatorFrames(uint32_t stack_id)>& frames_of);

// Whether an exception says that memory ran out: PyTorch's OutOfMemoryError, TensorFlow's
// ResourceExhaustedError, XLA's RESOURCE_EXHAUSTED, or a message of the CUDA error.
bool says_out_of_memory(const ProgramError& error);

} // namespace gpuleak::analyzer
