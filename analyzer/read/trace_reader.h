// Reads a gpuleak trace file (include/gpuleak/trace_format.h): the mirror image of the writer.
//
// Nothing in the file is trusted. Every offset, size, count and length is checked against the file and
// its region before use, so corrupt or hostile input yields a TraceError or warnings, never a crash.
// A trace the writer did not finish (the process was killed, or is still running) is read as far as it
// is valid: records whose commit word does not match are skipped and counted, and each anomaly is
// described by one line in warnings().
//
// The trace is decoded when it is opened, except for the event ring, which may hold tens of millions of
// events: it is read in place, where the analysis visits it (visit_events_newest_first), and decoded
// into memory only for callers of events(). The reader keeps the file mapped for that. What depends on
// a pass over the ring, events() and the ring's torn count in warnings(), is computed on the first call
// that needs it, so a reader must not be shared between threads without a lock.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "gpuleak/trace_format.h"
#include "read/event_record.h"
#include "read/event_ring.h"
#include "read/mapped_file.h"
#include "read/trace_error.h"

namespace gpuleak::analyzer {

// Who sent the signal that ended a process (format::EndSender).
struct SignalSender {
    format::SenderKind kind = format::SenderKind::Unknown; // also in files before format 18
    int32_t signal_code = 0;                               // siginfo's si_code
    int32_t pid = 0;                                       // with kinds Process, Itself and Notebook
    uint32_t uid = 0;
    std::string name; // the sender's command name (comm) as it sent it, as read: print with printable()
    // The launcher wrote the end after its child died without one (SIGKILL).
    bool written_by_launcher = false;
};

struct ProcessEnd {
    format::EndState state = format::EndState::Running; // Running also when the end record is torn
    int32_t exit_code = 0;                              // when state == Exited
    int32_t signal = 0;                                 // when state == Signaled
    SignalSender sender;                                // when state == Signaled
    uint64_t monotonic_ns = 0;                          // when state != Running
    // With state Running: whether the process still ran when the trace was opened (trace_set.h's
    // writer_running), so was not killed; empty when that cannot be told (another machine's trace).
    std::optional<bool> running_when_opened;
};

// The function that multiprocessing started the process to run (format::ProcessTarget).
struct ProcessTarget {
    std::string filename;
    std::string qualname; // co_name on 3.10, which has no qualified names
    int32_t first_line = 0;
    std::optional<int> dataloader_worker_id; // the worker_id argument of torch's _worker_loop
};

struct TraceCounters {
    uint64_t ring_head = 0;
    uint64_t notable_count = 0;
    uint64_t modules_used = 0;
    uint64_t strings_used = 0;
    uint64_t stacks_used = 0;
    uint64_t live_untracked = 0; // allocations not recorded at all: the totals are short by them
    uint64_t stacks_dropped = 0;
    uint64_t strings_dropped = 0;
    uint64_t timeline_samples = 0;
    uint64_t timeline_interval_ns = 0;
    uint64_t free_unknown = 0;
    uint64_t code_used = 0;
    uint64_t code_dropped = 0; // code objects that did not fit: their frames name code id 0
    // Events a signal handler made while its thread was recording already: dropped. Allocations, frees
    // and failures; then markers, source names and forks.
    uint64_t reentry_dropped = 0;
    uint64_t reentry_dropped_notes = 0;
};

struct TraceHeader {
    uint32_t format_version = 0;
    uint32_t flags = 0; // format::HeaderFlag bits
    uint64_t file_bytes = 0;
    int32_t pid = 0;
    int32_t ppid = 0;
    uint64_t start_realtime_ns = 0;
    uint64_t start_monotonic_ns = 0;
    uint32_t stack_depth = 0;
    uint32_t timeline_interval_ms_initial = 0;
    std::string hostname;
    std::string parent_trace;
    std::vector<std::string> command_line;
    uint64_t live_capacity = 0;
    uint64_t spill_capacity = 0;
    uint64_t ring_capacity = 0;
    uint64_t notable_capacity = 0;
    uint64_t timeline_capacity = 0;
    // The distributed launcher's RANK, LOCAL_RANK and WORLD_SIZE; -1 when unset.
    int32_t rank = -1;
    int32_t local_rank = -1;
    int32_t world_size = -1;
    uint64_t host_memory_bytes = 0; // the machine's MemTotal; 0 when unknown
    // The job (format::FileHeader's): the machine's rank, Slurm's task, its number on the machine and the
    // job's tasks, -1 when unset; the job's id, empty when unset.
    int32_t node_rank = -1;
    int32_t slurm_task = -1;
    int32_t slurm_local_task = -1;
    int32_t slurm_tasks = -1;
    std::string job;
    TraceCounters counters;
    // (major << 8) | minor of the CPython whose frames the stacks hold, which line tables depend on; 0
    // when there is none.
    uint16_t python_version = 0;
    format::Accounting accounting{};
    std::array<format::DeviceMemoryView, format::kMaxDevices> device_memory{}; // valid where total_bytes != 0
    ProcessEnd end;
    std::optional<ProcessTarget> target; // none where multiprocessing did not start it, or it was not read

    [[nodiscard]] bool has_flag(format::HeaderFlag flag) const {
        return (flags & static_cast<uint32_t>(flag)) != 0;
    }
    [[nodiscard]] bool simulated_device() const { return has_flag(format::HeaderFlag::SimulatedDevice); }
    // Only host memory was sampled: the process never used CUDA.
    [[nodiscard]] bool host_only() const { return has_flag(format::HeaderFlag::HostOnly); }
    // gpuleak attach began the trace in a running process: what the process made before is not in it.
    [[nodiscard]] bool attached() const { return has_flag(format::HeaderFlag::Attached); }
};

struct Module {
    std::string path;
    std::vector<uint8_t> build_id;
    uint64_t load_address = 0;
    uint64_t low = 0;
    uint64_t high = 0;
};

// A Python frame of a stack: the code object it ran, where in its bytecode, and whether it was the first
// frame its evaluation loop ran (format::kPythonFrameLoopEntry).
struct PythonFrame {
    uint32_t code_id = 0;            // in code_objects(); 0, or an id missing there, when it was not recorded
    uint32_t instruction_offset = 0; // bytes, or format::kPythonOffsetBeforeFirstInstruction
    bool loop_entry = false;
    bool operator==(const PythonFrame&) const = default;
};

struct CodeObject {
    std::string filename;
    std::string qualname; // co_name on 3.10, which has no qualified names
    int32_t first_line = 0;
    uint64_t address = 0;
    std::vector<uint8_t> line_table; // in the format of TraceHeader::python_version
    bool truncated = false;          // a string or the line table was cut: lines may be unknown
    bool operator==(const CodeObject&) const = default;
};

struct LiveAllocation {
    uint64_t address = 0;
    uint64_t size = 0;
    uint64_t time_ns = 0;
    uint64_t stream = 0;   // as its Alloc event's: read through call_stream() and mapped_handle()
    uint32_t stack_id = 0; // may name a stack that was dropped or torn: look it up, never index
    uint32_t thread_id = 0;
    int16_t device = 0; // ordinal, -1 host, -2 unknown
    format::MemoryKind kind = format::MemoryKind::None;
    uint8_t api = 0;
    uint64_t sequence = 0; // of its Alloc event in the ring (format::LiveSlot::sequence)

    // The stream of an asynchronous allocation (0: none); a mapping's field holds the handle it maps.
    [[nodiscard]] uint64_t call_stream() const { return kind == format::MemoryKind::VmmMapping ? 0 : stream; }
    // A VmmMapping's: the handle of the physical memory (VmmPhysical) it maps.
    [[nodiscard]] uint64_t mapped_handle() const { return stream; }
};

// Live allocations that had no slot of their own, counted by site (format::SpillSite). Kind None: those
// whose site found no record, of any site, kind and device.
struct SpilledSite {
    uint32_t stack_id = 0;
    int16_t device = 0;
    format::MemoryKind kind = format::MemoryKind::None;
    uint64_t count = 0;
    uint64_t bytes = 0;
    // Where in the order of events they were made (format::SpillBucket): stretches of event numbers
    // [first_sequence, end_sequence) with `count` of them, made between the two times. Only those
    // that hold any, in order.
    struct Stretch {
        uint64_t first_sequence = 0;
        uint64_t end_sequence = 0;
        uint64_t count = 0;
        uint64_t first_time_ns = 0;
        uint64_t last_time_ns = 0;
    };
    std::vector<Stretch> stretches;
};

struct LiveSet {
    std::vector<LiveAllocation> allocations; // in slot order
    uint64_t invalid_slots = 0;              // neither free nor a well-formed live allocation
    std::vector<SpilledSite> spilled;        // sites with live allocations spilled, in record order
};

struct EventLog {
    std::vector<Event> events; // oldest first
    // Claimed but no longer in the file: the ring wrapped, or the notable array was full.
    uint64_t dropped = 0;
    // Not committed (in flight when the process died), malformed, or cut off with a truncated file.
    uint64_t torn = 0;
};

struct TimelineSample {
    uint64_t sample = 0; // sample number: its commit word minus one
    uint64_t time_ns = 0;
    uint64_t rss_bytes = 0;
    uint64_t events = 0;         // the events claimed before it
    format::HostSample host{};   // host.fields says which figures were read
    uint64_t python_modules = 0; // sys.modules' size; 0 when unknown
    std::array<uint64_t, format::kKindCount> kind_bytes{};
    std::array<uint64_t, format::kMaxDevices> device_bytes{};
    std::array<uint64_t, format::kMaxDevices> device_block_bytes{};
    // What the driver last said was used on each device, and when; none where it was not asked yet.
    struct DriverSaid {
        uint64_t used_bytes = 0;
        uint64_t time_ns = 0;
    };
    std::array<std::optional<DriverSaid>, format::kMaxDevices> driver_said{};

    [[nodiscard]] bool has(format::HostField field) const {
        return (host.fields & static_cast<uint32_t>(field)) != 0;
    }
};

class TraceReader {
  public:
    // `path` names the file in every error message. Throws TraceError.
    static TraceReader open(const std::string& path);
    // Reads a trace already in memory (a fuzzer's input, a copy); `name` stands for the file in messages.
    static TraceReader parse(std::span<const std::byte> bytes, const std::string& name);

    [[nodiscard]] const TraceHeader& header() const { return header_; }
    [[nodiscard]] const std::vector<Module>& modules() const { return modules_; }
    [[nodiscard]] const std::map<uint32_t, std::string>& strings() const { return strings_; }
    // The string an event names (its field is 64 bits wide); nullptr when the trace has none of that id
    // (lost with a torn strings region, or not an id at all).
    [[nodiscard]] const std::string* string(StringId id) const {
        const auto found =
            id.value <= UINT32_MAX ? strings_.find(static_cast<uint32_t>(id.value)) : strings_.end();
        return found == strings_.end() ? nullptr : &found->second;
    }
    // Each stack's native return addresses, innermost first.
    [[nodiscard]] const std::map<uint32_t, std::vector<uint64_t>>& stacks() const { return stacks_; }
    // The Python frames of the stacks that have any, innermost first, by stack id.
    [[nodiscard]] const std::map<uint32_t, std::vector<PythonFrame>>& python_stacks() const {
        return python_stacks_;
    }
    [[nodiscard]] const std::map<uint32_t, CodeObject>& code_objects() const { return code_objects_; }
    [[nodiscard]] const LiveSet& live_allocations() const { return live_; }
    // The ring's events, decoded into memory on the first call (64 bytes each).
    [[nodiscard]] const EventLog& events() const;
    // The same events as events(), newest first, each passed to visit(const Event&) as it is read from
    // the file, with nothing kept: what reading a ring of any size in bounded memory takes. The visit
    // goes on while visit returns true.
    template <class Visit> void visit_events_newest_first(Visit&& visit) const {
        bool complete = true;
        const uint64_t visited =
            ring_.visit_newest_first([&](const Event& event) { return complete = visit(event); });
        if (complete)
            note_ring_visited(visited);
    }
    // The ring's newest valid event, if any, found without a pass over the ring.
    [[nodiscard]] std::optional<Event> newest_event() const;
    // The ring's slots in the file that the window covers: no visit sees more events than this.
    [[nodiscard]] uint64_t ring_slots_present() const { return ring_.present(); }
    // Ring events claimed but overwritten: events().dropped, known without a pass over the ring.
    [[nodiscard]] uint64_t events_dropped() const { return ring_.dropped(); }
    [[nodiscard]] const EventLog& notable_events() const { return notable_; }
    // Committed samples in time order.
    [[nodiscard]] const std::vector<TimelineSample>& timeline() const { return timeline_; }
    // Counts the ring's torn events with a pass over the ring unless a visit has done so.
    [[nodiscard]] const std::vector<std::string>& warnings() const;
    // The file was cut shorter while it was read (MappedFile::shrank): what lay past its new end read as
    // never written. False for a trace parsed from bytes.
    [[nodiscard]] bool shrank() const { return file_ != nullptr && file_->shrank(); }

  private:
    class Decoder;
    TraceReader() = default;

    // The first complete visit fixes the ring's valid events, and so its torn count, for warnings():
    // a file still being written could give later visits other counts.
    void note_ring_visited(uint64_t valid) const;

    TraceHeader header_;
    std::vector<Module> modules_;
    std::map<uint32_t, std::string> strings_;
    std::map<uint32_t, std::vector<uint64_t>> stacks_;
    std::map<uint32_t, std::vector<PythonFrame>> python_stacks_;
    std::map<uint32_t, CodeObject> code_objects_;
    LiveSet live_;
    EventRing ring_;
    mutable std::optional<uint64_t> ring_valid_;
    mutable std::optional<EventLog> events_;
    EventLog notable_;
    std::vector<TimelineSample> timeline_;
    std::vector<std::string> decoded_warnings_; // all but the ring's torn count
    std::size_t ring_warning_at_ = 0;           // where that one goes among them
    mutable std::optional<std::vector<std::string>> warnings_;
    std::shared_ptr<const MappedFile> file_; // null for a trace parsed from bytes
};

} // namespace gpuleak::analyzer
