// The gpuleak trace file: written by libgpuleak.so through a MAP_SHARED mapping, read by the analyzer.
// Both sides include this header; it is the only contract between them.
//
// Layout: a fixed-size header followed by regions whose offsets and sizes the header gives.
//   timeline  TimelineSample array: totals and host memory sampled periodically, thinned so it
//             covers the whole run
//   notable   EventRecord array: failures, markers, forks, source names, thread starts and the start of
//             Python's finalization, kept even when the ring wraps
//   modules   append-only ModuleRecord stream (every loaded object, also those dlopen'ed later)
//   strings   append-only StringRecord stream (command line pieces, marker labels, named sources)
//   stacks    append-only StackRecord stream (each distinct call stack once, native and Python frames)
//   code      append-only CodeRecord stream (each Python code object a stack holds, once)
//   spill     SpillSite array: the live allocations the live table had no slot for, counted by site
//   ring      EventRecord ring: the most recent events; header.ring_head counts all ever claimed
//   live      LiveStripeMarks, then a LiveSlot array: the live allocations one by one, whatever
//             happened to the ring (see below). Last in the file, and reserved on disk as it grows: the
//             file's length covers it whole from the start, its blocks are allocated a stripe's chunk
//             at a time, before the chunk's first slot is used.
//
// A process that has not used CUDA (a DataLoader worker, a Python program before its first CUDA call) has
// only the header, the timeline and the notable array, which come first: its file ends there and its
// header has HeaderFlag::HostOnly. Its first CUDA call lengthens the file and clears the flag.
//
// Crash consistency: every record has a commit word that the writer stores last, with release order,
// after the record's other fields. A record whose commit word is not the expected value was in flight
// when the process died and is ignored. Append-only streams are written in order under a lock, so a
// reader stops at the first record that is not committed.
//
// The live table is split into kLiveStripes stripes of consecutive slots; stripe i holds slots
// [live_stripe_start(live_capacity, i), live_stripe_start(live_capacity, i + 1)). The live region holds
// LiveStripeMarks (512 bytes, so the slots stay 64-byte aligned) and then live_capacity slots; when
// live_capacity is 0 it may hold nothing. A stripe's mark is one more than the index, within the stripe,
// of the highest slot it has ever used (0: none): no slot at or past the mark has ever been live, so a
// reader reads only up to the marks, not a whole table sized by GPULEAK_MAX_MB. The writer raises a mark
// before the slot it covers turns live, so a reader that sees a slot live (also after a SIGKILL at any
// instant) sees a mark that covers it. A mark larger than its stripe is corrupt.
//
// The live set is exact however large it grows: an allocation that finds no free slot in its stripe
// is kept in the recorder's private memory and counted in the SpillSite of its call stack, kind and
// device (record 0 counts those whose site found no record), so the totals, the sites and their bytes
// stay exact; only what needs each of them (its own time and address) is not in the file.
//
// All integers are little-endian; the reader rejects files whose endian_tag does not read back.
#pragma once

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
namespace gpuleak::format {
#define GPULEAK_FORMAT_ENUM(name, type) enum class name : type
#else
#define GPULEAK_FORMAT_ENUM(name, type) enum name
#endif

static const char kMagic[8] = {'G', 'P', 'U', 'L', 'E', 'A', 'K', '\x1a'};
// 2: the live region starts with LiveStripeMarks. 3: Python frames in stacks, the code region. 4: a
// Python frame says whether it was the first its evaluation loop ran (kPythonFrameLoopEntry). 5: source
// names (EventType::SourceName) in the notable array. 6: EventType::PythonFinalizing. 7: a live slot
// holds its allocation's event sequence number; PythonFinalizing holds the ring's head then. 8: the
// spill region; the live region is last, reserved on disk as it grows. 9: host memory in the timeline
// (TimelineSample::host), HeaderFlag::HostOnly, the distributed rank, a fork's stack; the timeline and
// the notable array come first. 10: TimelineSample::python_modules. 11: the header is 12 KiB and holds
// the function multiprocessing started the process to run (ProcessTarget), and the reentry_dropped
// counts. 12: EventType::Retainers. 13: EventType::ThreadStart. 14: a TimelineSample holds each
// device's allocated bytes and what its driver last said was used. 15: a VmmMapping's stream is the
// handle of the physical memory it maps. 16: EventType::ProgramError (15's files read the same). 17:
// HostField::SimulatedDeviceResident (15's and 16's files read the same). 18: who sent the signal that
// ended the process (EndSender), also written by the launcher for its child's SIGKILL (15's to 17's
// files read the same, their sender unknown). 19: the job the process ran in (node_rank, the Slurm task,
// job; 15's to 18's files read as in none). 20: EventType::Context (15's to 19's files read as of
// processes that made no context). 21: HeaderFlag::Attached, EndState::Detached and kBeforeAttachApi,
// for a trace that `gpuleak attach` began in a running process and ended while it went on (15's to 20's
// files read the same).
static const uint32_t kFormatVersion = 21;
// The oldest version a reader of this one reads: its layout is this one's.
static const uint32_t kOldestReadableFormatVersion = 15;
static const uint32_t kEndianTag = 0x01020304u;
// The api byte of an object that was live when `gpuleak attach` began recording, listed then (PyTorch's
// segments and blocks, from its allocator's snapshot): its time is the attach's, and it has no stack. 255
// is gpuleak's C API; the CUDA entry points are numbered from 0 up.
static const uint8_t kBeforeAttachApi = 254;
static const uint32_t kHeaderBytes = 12288;
static const uint32_t kMaxDevices = 16;      // ordinals >= this are accounted as unknown
static const uint32_t kAccountingSlots = 18; // kMaxDevices devices, host, unknown device
static const uint32_t kHostSlot = 16;
static const uint32_t kUnknownDeviceSlot = 17;
static const uint32_t kKindCount = 10; // MemoryKind values are < kKindCount
static const uint32_t kCommandLineBytes = 4096;
static const uint32_t kMaxStackDepth = 1024;
static const uint32_t kLiveStripes = 64;

GPULEAK_FORMAT_ENUM(MemoryKind, uint8_t){
    None = 0,
    Device = 1,         // cudaMalloc, cuMemAlloc, pitched and 3D allocations
    Managed = 2,        // cudaMallocManaged, cuMemAllocManaged
    PinnedHost = 3,     // cudaMallocHost, cudaHostAlloc, cuMemAllocHost, cuMemHostAlloc
    HostRegistered = 4, // cuMemHostRegister: host memory the program already owned, now pinned
    AsyncPool = 5,      // cudaMallocAsync, cudaMallocFromPoolAsync and their driver twins
    VmmPhysical = 6,    // cuMemCreate: physical memory behind a generic allocation handle
    VmmMapping = 7,     // cuMemMap: a physical handle mapped at a virtual range
    VaReservation = 8,  // cuMemAddressReserve: address space only, no memory
    Block = 9,          // a block a sub-allocator handed out inside reserved memory (public C API)
};

// Objects of different key spaces may share an address (a block at the start of its segment, a VMM
// handle value equal to some pointer); a free names the space it looks in.
GPULEAK_FORMAT_ENUM(KeySpace, uint8_t){
    Pointer = 0,   // Device, Managed, PinnedHost, HostRegistered, AsyncPool
    VmmHandle = 1, // VmmPhysical, keyed by handle value
    VmmRange = 2,  // VmmMapping, keyed by virtual address
    VaRange = 3,   // VaReservation
    BlockSpace = 4,
};

GPULEAK_FORMAT_ENUM(EventType, uint16_t){
    Alloc = 1,
    Free = 2,        // address, size, kind, device and stack_id are those of the allocation freed
    FreeUnknown = 3, // a free of an address gpuleak never saw allocated (or of an untracked one)
    AllocFailed = 4, // size = requested bytes, result = the error code returned to the program,
                     // address = the device's free bytes per the driver then (UINT64_MAX: unknown).
                     // Kind Block: a sub-allocator refused a block (gpuleak_block_alloc_failed);
                     // result = kAllocatorRefused, address = free bytes as the allocator saw them,
                     // stream = the failed allocations of device memory on that device the thread
                     // made since its last successful allocation: the allocator gave up after them,
                     // so they and this are one out-of-memory error (0: it refused by a limit of its own)
    PoolTrim = 5,    // address = pool handle, size = bytes the caller asked to keep
    Marker = 6,      // address = string id of the label
    Fork = 7,        // address = pid of the child, result = its ForkOrigin, stack_id = the forking
                     // thread's stack (0 in a host-only trace, which keeps no stacks)
    // A file name that Python code was compiled under stands for source the program named (a notebook's
    // cell): address = string id of the file name, size = string id of the name ("cell [12]"), stream =
    // string id of the source text (0: it did not fit). In the notable array only; a later naming of the
    // same file replaces an earlier one.
    SourceName = 8,
    // The Python interpreter was first seen finalizing (Py_FinalizeEx past the atexit handlers: module
    // teardown, then the runtime's own), or began gpuleak's own search at exit (an atexit handler), at
    // time_ns, by thread_id. In the notable array only, at most once: what follows is no longer the
    // program's own code. size = the ring's head then: the events
    // numbered below it are the program's.
    PythonFinalizing = 9,
    // What kept the device memory alive, as gpuleak.why() found it in the process (gpuleak_retainers):
    // address = string id of the label saying when ("out of memory on device 0", "end of epoch 3"), size =
    // string id of the JSON document gpuleak.why() wrote, stream = the ring's head then. In the notable
    // array only.
    Retainers = 10,
    // A Python thread was started where stack_id says (the starting thread's stack then), and thread_id
    // is its id: a library's thread (PyTorch's pin-memory thread) runs none of the program's code, and the
    // line that started it is the program's for what it makes. In the notable array only, at the
    // thread's first allocation (threads that allocate nothing are not recorded), while starts fill less
    // than half of it. Stack 0: the thread ended, and its id may be another's from then on.
    ThreadStart = 11,
    // The Python program's code ended with an exception that no code caught (what the interpreter printed
    // as its traceback), recorded as it finalizes: address = string id of a JSON document {"type": the
    // exception's class, qualified by its module unless a builtin, "message": str() of it (at most 4000
    // characters), "frames": [[file, line, function], ...] of its traceback, outermost first, at most the
    // 64 innermost}. In the notable array only, at most once.
    ProgramError = 12,
    // The process made its first context on `device` (cuDevicePrimaryCtxRetain, which the CUDA runtime
    // calls at a device's first use): a context takes device memory of its own, which no allocation
    // counts. time_ns, thread_id, stack_id (where; 0 in a trace that keeps no stacks), api; address and
    // size hold the device's UUID as its driver gave it (bytes 0-7 and 8-15, little-endian; both 0:
    // unknown), which tells a physical device apart where processes number the devices they see
    // differently (CUDA_VISIBLE_DEVICES). In the notable array only, once per device.
    Context = 13,
};

// What forked a child, told by the recorder from the file names of the forking thread's Python frames.
GPULEAK_FORMAT_ENUM(ForkOrigin, int32_t){
    Unknown = 0,
    DataLoader = 1,      // a frame of torch/utils/data/dataloader.py: the child is a DataLoader's worker
    Multiprocessing = 2, // a frame in multiprocessing/: a Pool's or a Process's
};

// The result of a sub-allocator's refusal: no CUDA error code, as no CUDA call need have failed.
static const int32_t kAllocatorRefused = -1;

GPULEAK_FORMAT_ENUM(EndState, uint32_t){
    Running = 0,  // no end record: the process is alive, or was killed (SIGKILL, OOM killer)
    Exited = 1,   // exit_code is valid
    Signaled = 2, // end_signal is valid: a fatal signal was caught and re-raised
    Exec = 3,     // the process replaced its image (exec); the new image, same pid, has a trace of its own
    // `gpuleak attach` stopped recording (HeaderFlag::Attached) while the process went on running
    Detached = 4,
};

// Who sent the signal that ended the process, as far as it can be known.
GPULEAK_FORMAT_ENUM(SenderKind, uint32_t){
    Unknown = 0,
    // The kernel (siginfo's si_code > 0, or SI_KERNEL): a fault, a resource limit, a terminal's Ctrl-C or
    // hang-up, a write to a pipe nobody reads.
    Kernel = 1,
    Itself = 2,  // the process signalled itself: abort(), raise(), a library's fatal error
    Process = 3, // another process (kill(2), sigqueue): pid, uid and name are valid
    // Written by the launcher: its child died by SIGKILL and the OOM killer's count in the launcher's
    // memory cgroup rose during the run, or the kernel log names the kill.
    OomKiller = 4,
    // Written by the kernel launcher: Jupyter, which started the launcher, signalled it to end the kernel
    // (a restart or a shutdown the kernel did not answer in time). pid and name are Jupyter's.
    Notebook = 5,
};

GPULEAK_FORMAT_ENUM(EndWriter, uint32_t){
    Process = 0,  // the process itself, in its signal handler or at exit
    Launcher = 1, // `gpuleak run` or the kernel launcher, after its child died without an end record
};

GPULEAK_FORMAT_ENUM(CodeFlag, uint32_t){
    Truncated = 1u << 0, // a string or the line table did not fit whole: lines may be unknown
};

GPULEAK_FORMAT_ENUM(HeaderFlag, uint32_t){
    SimulatedDevice = 1u << 0, // the CUDA libraries in the process were gpuleak's simulated device
    // Some allocation could not be recorded at all (no memory for it): the totals are short by it.
    LiveUntracked = 1u << 1,
    // The process never used CUDA (or gpuleak's API): only its host memory was sampled, and only the
    // header, the timeline and the notable array are in the file (see the layout above).
    HostOnly = 1u << 2,
    // `gpuleak attach` began the trace in a process that was running already: what the process made
    // before then is not in it, and the trace's start is the attach's, not the process's.
    Attached = 1u << 3,
};

// Which of a TimelineSample's host figures were read (a /proc or cgroup file may be missing).
GPULEAK_FORMAT_ENUM(HostField, uint32_t){
    Status = 1u << 0,       // rss_anon, rss_file, rss_shmem, swap (/proc/self/status)
    Proportional = 1u << 1, // uss, pss (/proc/self/smaps_rollup), as of proportional_time_ns
    Cgroup = 1u << 2,       // cgroup_bytes (memory.current, v1 memory.usage_in_bytes)
    CgroupLimit = 1u << 3,  // cgroup_limit_bytes: the cgroup has a limit
    Available = 1u << 4,    // available_bytes (MemAvailable in /proc/meminfo)
    HeapFree = 1u << 5,     // heap_free (glibc's mallinfo2), as of heap_time_ns
    // simulated_device_resident_pages: on the simulated device, how much of its device memory (host
    // memory of the process, mapped untouched) was resident, as of the latest reading
    SimulatedDeviceResident = 1u << 6,
};

#undef GPULEAK_FORMAT_ENUM

struct Region {
    uint64_t offset; // from the start of the file, 64-byte aligned
    uint64_t size;   // bytes
};

// Per accounting slot (device ordinal, host, unknown) and memory kind: bytes live now and the most
// ever live at once.
struct Accounting {
    uint64_t live_bytes[18][10];
    uint64_t peak_bytes[18][10];
};

// The driver's view of one device's memory (cuMemGetInfo), asked now and then by the hooks. Valid when
// total_bytes is not 0.
struct DeviceMemoryView {
    uint64_t total_bytes;
    uint64_t lowest_free_bytes;
    uint64_t last_free_bytes;
    uint64_t last_time_ns; // CLOCK_MONOTONIC when the driver said last_free_bytes
};

// The function that multiprocessing started the process to run (what BaseProcess.run calls: a Process's
// target, a Pool's worker loop, a DataLoader's _worker_loop; or a Process subclass's own run), read from
// the process's first Python thread by its sampler once that thread runs it. The other fields are valid once
// commit is kTargetCommit.
struct ProcessTarget {
    uint32_t commit;
    int32_t first_line; // of the function's definition
    // A DataLoader worker's id: the worker_id argument of torch's _worker_loop; -1 for other targets, or
    // where it could not be read.
    int64_t dataloader_worker_id;
    uint32_t filename_bytes; // excluding the terminating NUL, which is present
    uint32_t qualname_bytes; // the same; co_name on 3.10, which has no qualified names
    char filename[512];      // both UTF-8, cut at a whole character where they did not fit
    char qualname[256];
};

static const uint32_t kTargetCommit = 0x54524754u; // "TGRT"

// Who sent the signal that ended the process (FileHeader::end_sender).
struct EndSender {
    int32_t signal_code; // siginfo's si_code: <= 0 sent by a process, > 0 by the kernel
    uint32_t kind;       // SenderKind
    int32_t pid;         // the sender's, where a process sent it; 0 where unknown
    uint32_t uid;
    char name[16];       // the sender's /proc/PID/comm as the signal arrived, NUL-terminated; may be empty
    uint32_t written_by; // EndWriter
    uint32_t reserved;
};

struct FileHeader {
    char magic[8];
    uint32_t format_version;
    uint32_t endian_tag;
    uint32_t header_bytes;
    uint32_t flags; // HeaderFlag bits
    uint64_t file_bytes;

    int32_t pid;
    int32_t ppid;
    uint64_t start_realtime_ns;  // CLOCK_REALTIME at creation
    uint64_t start_monotonic_ns; // CLOCK_MONOTONIC at creation; event times are on this clock
    uint32_t stack_depth;        // configured native stack depth
    uint32_t timeline_interval_ms_initial;
    char hostname[64];
    char parent_trace[256]; // path of the parent process's trace file, if it had one when forking
    uint32_t command_line_bytes;
    uint32_t reserved0;
    char command_line[4096]; // argv joined by NUL bytes, truncated

    Region modules;
    Region strings;
    Region stacks;
    Region live;
    Region ring;
    Region notable;
    Region timeline;
    Region code;
    Region spill;

    uint64_t live_capacity;     // LiveSlot count
    uint64_t spill_capacity;    // SpillSite count
    uint64_t ring_capacity;     // EventRecord count
    uint64_t notable_capacity;  // EventRecord count
    uint64_t timeline_capacity; // TimelineSample count

    // Counters, updated atomically while the process runs.
    uint64_t ring_head;     // events ever claimed; event n lives in ring slot n % ring_capacity
    uint64_t notable_count; // notable events claimed (may exceed capacity: the rest were dropped)
    uint64_t modules_used;  // bytes of the modules region written
    uint64_t strings_used;
    uint64_t stacks_used;
    uint64_t live_untracked; // allocations not recorded at all (LiveUntracked): neither slot nor spill
    uint64_t stacks_dropped; // stacks that did not fit; their events carry stack id 0
    uint64_t strings_dropped;
    uint64_t timeline_samples;     // samples ever taken (the array keeps a thinned subset)
    uint64_t timeline_interval_ns; // current sampling interval (doubles when the array is thinned)
    uint64_t free_unknown;         // frees of addresses not in the live table
    uint64_t code_used;            // bytes of the code region written
    uint64_t code_dropped;         // code objects that did not fit; their frames carry code id 0
    uint32_t python_version;       // (major << 8) | minor of the CPython whose frames stacks hold; 0: none
    uint32_t reserved1;
    uint64_t spill_used; // SpillSite records committed, record 0 included
    // The distributed launcher's RANK, LOCAL_RANK and WORLD_SIZE (torchrun, DeepSpeed, Accelerate); -1
    // when unset or not a number.
    int32_t rank;
    int32_t local_rank;
    int32_t world_size;
    uint32_t reserved2;
    uint64_t host_memory_bytes; // MemTotal in /proc/meminfo at creation; 0 when unknown
    // Events dropped because the thread that made them was recording already: a signal handler that
    // interrupted the recorder called the C API (it would have waited forever on a lock its thread held).
    // Allocations, frees and failed allocations; then markers, source names and forks.
    uint64_t reentry_dropped;
    uint64_t reentry_dropped_notes;

    Accounting accounting;
    struct DeviceMemoryView device_memory[16];

    // How the process ended. end_commit is written last: only when it equals kEndCommit are the
    // other end fields valid.
    uint32_t end_state; // EndState
    int32_t exit_code;
    int32_t end_signal;
    uint32_t end_commit;
    uint64_t end_monotonic_ns;

    struct ProcessTarget target;

    struct EndSender end_sender; // with end_state Signaled, under end_commit as the other end fields

    // The job the process ran in, as its environment said when the trace was made and again when it was
    // promoted: its machine's rank among the job's (torchrun's GROUP_RANK, else Slurm's SLURM_NODEID);
    // Slurm's task, its number on its machine and the job's tasks (SLURM_PROCID, SLURM_LOCALID,
    // SLURM_NTASKS); -1 where unset or not a number. The job's id: SLURM_JOB_ID, else torchrun's
    // TORCHELASTIC_RUN_ID (not its default, "none"); empty where there is none.
    int32_t node_rank;
    int32_t slurm_task;
    int32_t slurm_local_task;
    int32_t slurm_tasks;
    char job[64];
};

static const uint32_t kEndCommit = 0x454e4421u; // "END!"

// Append-only stream records start with this prefix. `commit` holds kRecordCommit once the record is
// complete; `bytes` is the record's total size including the prefix, a multiple of 8.
struct RecordPrefix {
    uint32_t commit;
    uint32_t bytes;
};
static const uint32_t kRecordCommit = 0x52454321u; // "REC!"

struct ModuleRecord {
    struct RecordPrefix prefix;
    uint64_t load_address; // dlpi_addr: add to an ELF virtual address to get a run-time address
    uint64_t low;          // lowest mapped address of its PT_LOAD segments
    uint64_t high;         // one past the highest
    uint32_t build_id_bytes;
    uint32_t path_bytes; // excluding the terminating NUL, which is present
    uint8_t build_id[32];
    // followed by path_bytes + 1 bytes of path, padded to 8
};

struct StringRecord {
    struct RecordPrefix prefix;
    uint32_t id;    // ids start at 1 and are dense
    uint32_t bytes; // excluding the terminating NUL, which is present
    // followed by bytes + 1 bytes of UTF-8, padded to 8
};

struct StackRecord {
    struct RecordPrefix prefix;
    uint32_t id;           // ids start at 1 and are dense; 0 means "no stack"
    uint16_t native_count; // return addresses, innermost first
    uint16_t python_count; // Python frames of the same thread at the same moment, innermost first
    // followed by native_count uint64_t addresses, then python_count PythonFrameRecords
};

// A Python frame: the code object it runs (a CodeRecord id; 0 when the code object did not fit), where
// in its bytecode, in bytes (code units are 2 bytes), and a flag: the low 31 bits of offset_and_flags
// are the offset (kPythonOffsetMask), the top bit is kPythonFrameLoopEntry. The line is the analyzer's
// to compute, from the code record's line table. Stacks that differ only in the flag are two stacks.
struct PythonFrameRecord {
    uint32_t code_id;
    uint32_t offset_and_flags;
};
static const uint32_t kPythonOffsetMask = 0x7fffffffu;
// The frame is the first that its run of CPython's evaluation loop (_PyEval_EvalFrameDefault, one
// native frame) ran; the frames inner of it up to the next such frame ran in the same loop. From 3.11
// one loop runs a Python function and the Python functions it calls, and a new one starts only where C
// code calls back into Python; on 3.10 every frame has a loop of its own. This is what places Python
// frames among the native frames.
static const uint32_t kPythonFrameLoopEntry = 0x80000000u;
// The frame has not begun its first instruction (3.10's f_lasti of -1, or 3.11/3.12's prev_instr
// before the bytecode): CPython reports the code object's first line for it. An offset, under the mask.
static const uint32_t kPythonOffsetBeforeFirstInstruction = 0x7fffffffu;

// A Python code object, recorded the first time a stack holds it. Code objects are freed and their
// addresses reused: another code object at the same address gets a record and an id of its own.
struct CodeRecord {
    struct RecordPrefix prefix;
    uint32_t id; // ids start at 1 and are dense
    int32_t first_line;
    uint64_t address; // of the code object in the process, for the curious
    uint32_t filename_bytes;
    uint32_t qualname_bytes;   // co_qualname; co_name on 3.10, which has no qualified names
    uint32_t line_table_bytes; // co_linetable, in the format of header.python_version
    uint32_t flags;            // CodeFlag bits
    // followed by filename (UTF-8), qualname (UTF-8) and line table bytes, padded to 8
};

// The start of the live region: the high-water mark of each stripe of the live table (see above).
struct LiveStripeMarks {
    uint64_t used[64]; // kLiveStripes
};

// One slot of the live table. A slot describes a live allocation exactly when state == kSlotLive.
struct LiveSlot {
    uint32_t state;
    uint32_t stack_id;
    uint64_t address;
    uint64_t size;
    uint64_t time_ns; // CLOCK_MONOTONIC at allocation
    uint64_t stream;  // as EventRecord::stream
    uint32_t thread_id;
    int16_t device; // ordinal, -1 host, -2 unknown
    uint8_t kind;   // MemoryKind
    uint8_t api;    // entry-point index (see entry_point_names in the interposer), 255 = public C API
    // The number of its Alloc event in the ring: where it was made in the order of the process's events,
    // which a ring that wrapped no longer holds.
    uint64_t sequence;
};
static const uint32_t kSlotFree = 0;
static const uint32_t kSlotLive = 0x4c495645u; // "LIVE"

// The live allocations of one site that have no slot of their own. Record i + 1 is written once, when
// its site first spills, and committed (commit = kRecordCommit) before spill_used counts it; record 0
// is committed at creation with kind None and counts the allocations whose site found no record.
// The tally changes as a pair: the writer fills tally[(version + 1) % 2] from tally[version % 2] and
// then stores version + 1, so that a reader of a process that stopped (also by a SIGKILL at any
// instant) takes tally[version % 2] and has a count and bytes that belong together.
struct SpillTally {
    uint64_t count;
    uint64_t bytes;
};
// Where in the order of events the live ones were made, kSpillBuckets equal stretches of event
// numbers: bucket i holds those numbered [i << bucket_shift, (i + 1) << bucket_shift). When an
// allocation is numbered past the last bucket, the buckets are merged in pairs and the shift grows by
// one, so they always cover the process's events so far. A bucket's times are those of the first and
// the latest allocation ever made in it (0: none): its live ones were made between. The buckets are
// approximate where the tally is exact (a SIGKILL during a merge may leave them torn).
#define GPULEAK_SPILL_BUCKETS 16
static const uint32_t kSpillBuckets = GPULEAK_SPILL_BUCKETS;
struct SpillBucket {
    uint64_t count;
    uint64_t first_time_ns;
    uint64_t last_time_ns;
};
struct SpillSite {
    uint32_t commit;
    uint32_t stack_id;
    int16_t device; // ordinal, -1 host, -2 unknown
    uint8_t kind;   // MemoryKind
    uint8_t bucket_shift;
    uint32_t version;
    struct SpillTally tally[2];
    struct SpillBucket buckets[GPULEAK_SPILL_BUCKETS];
};

struct EventRecord {
    uint64_t commit; // sequence number + 1 once committed; 0 while being written
    uint64_t time_ns;
    uint64_t address;
    uint64_t size;
    // The stream of an asynchronous call (0: none); of a VmmMapping's Alloc or AllocFailed, the handle of
    // the physical memory (VmmPhysical) it maps.
    uint64_t stream;
    uint32_t stack_id;
    uint32_t thread_id;
    uint16_t type; // EventType
    uint8_t kind;  // MemoryKind
    uint8_t api;
    int16_t device;
    uint16_t reserved0;
    int32_t result; // error code for AllocFailed
    uint32_t reserved1;
};

// Host memory of the process and of what it runs in, in bytes, as the kernel counts it.
// The unit of HostSample's simulated_device_resident_pages.
static const uint64_t kResidentPageBytes = 4096;

struct HostSample {
    uint32_t fields; // HostField bits: which of the figures below were read
    // On the simulated device: the pages (kResidentPageBytes) of its device memory that were resident, part
    // of the process's RSS that a real device keeps in its own memory (HostField::SimulatedDeviceResident).
    uint32_t simulated_device_resident_pages;
    uint64_t rss_anon;  // RssAnon: private and shared anonymous memory resident (the heap, Python objects)
    uint64_t rss_file;  // RssFile: file pages mapped and resident (libraries, mmap'ed data)
    uint64_t rss_shmem; // RssShmem: shared memory resident (/dev/shm, shared-memory tensors)
    uint64_t swap;      // VmSwap
    // Unique (Private_Clean + Private_Dirty) and proportional (Pss) set sizes. They take a walk over
    // the process's page tables, so they are read less often than the rest, at proportional_time_ns:
    // every sample carries the latest.
    uint64_t uss;
    uint64_t pss;
    uint64_t proportional_time_ns;
    uint64_t cgroup_bytes;       // the memory cgroup's working set: its usage less the page cache reclaimed
                                 // first (memory.stat's inactive_file), what its OOM killer weighs
    uint64_t cgroup_limit_bytes; // its limit (memory.max, v1 memory.limit_in_bytes)
    uint64_t available_bytes;    // the machine's MemAvailable
    // Free memory that glibc's malloc holds for reuse (mallinfo2's fordblks): freed blocks it keeps in its
    // heaps, resident but no longer the program's. Counting them walks the allocator's free lists under
    // its locks, so they too are read less often, at heap_time_ns, and every sample carries the latest.
    uint64_t heap_free;
    uint64_t heap_time_ns;
};

struct TimelineSample {
    uint64_t commit; // sample number + 1 once committed
    uint64_t time_ns;
    uint64_t rss_bytes;        // host resident set size of the process (VmRSS); 0 when unread
    uint64_t events;           // the ring's head then: where the sample falls in the order of events
    uint64_t kind_bytes[10];   // live bytes by MemoryKind, all devices and host together
    uint64_t device_bytes[16]; // live device-memory bytes per ordinal (Device, Managed, AsyncPool,
                               // VmmPhysical), 0..kMaxDevices-1
    struct HostSample host;
    uint64_t python_modules; // sys.modules' size then: a Python program's imports rise, its work does not; 0
                             // when unknown
    uint64_t device_block_bytes[16]; // live bytes of the blocks a caching allocator reported (Block) per
                                     // ordinal
    // Per ordinal: its total less its free memory as the driver last told the hooks before the sample
    // (cuMemGetInfo, asked after allocations and frees of device memory when driver_view.h says), the whole
    // device's: every process's and every library's; and when the driver said it (CLOCK_MONOTONIC), 0 when it
    // was never asked. Read without a lock: a sample taken as the hooks write may pair an answer with the
    // time of the one before.
    uint64_t driver_used_bytes[16];
    uint64_t driver_said_ns[16];
};

#ifdef __cplusplus
static_assert(sizeof(FileHeader) <= kHeaderBytes, "header must fit its reserved space");
static_assert(sizeof(EndSender) == 40, "EndSender layout is part of the file format");
static_assert(sizeof(LiveSlot) == 56, "LiveSlot layout is part of the file format");
static_assert(sizeof(SpillSite) == 432, "SpillSite layout is part of the file format");
static_assert(sizeof(LiveStripeMarks) == kLiveStripes * sizeof(uint64_t) && sizeof(LiveStripeMarks) % 64 == 0,
              "the marks keep the live slots 64-byte aligned");
static_assert(sizeof(EventRecord) == 64, "EventRecord layout is part of the file format");
static_assert(sizeof(ModuleRecord) == 72, "ModuleRecord layout is part of the file format");
static_assert(sizeof(StackRecord) == 16, "StackRecord layout is part of the file format");
static_assert(sizeof(PythonFrameRecord) == 8, "PythonFrameRecord layout is part of the file format");
static_assert(sizeof(CodeRecord) == 40, "CodeRecord layout is part of the file format");
static_assert(sizeof(HostSample) == 104, "HostSample layout is part of the file format");
static_assert(sizeof(TimelineSample) == 736, "TimelineSample layout is part of the file format");
static_assert(sizeof(ProcessTarget) == 792, "ProcessTarget layout is part of the file format");

// A CPython version as header.python_version holds it: 3.12 is 0x030c. Line tables depend on it.
constexpr uint16_t python_version(unsigned major, unsigned minor) {
    return static_cast<uint16_t>(major << 8 | minor);
}

// The first slot of live-table stripe `stripe`; stripe kLiveStripes gives the end of the table. The
// slots are shared out as capacity * stripe / kLiveStripes would, without overflowing for any
// capacity a corrupt header may claim.
constexpr uint64_t live_stripe_start(uint64_t capacity, uint32_t stripe) {
    return capacity / kLiveStripes * stripe + capacity % kLiveStripes * stripe / kLiveStripes;
}

// Which key space a kind's objects live in.
constexpr KeySpace key_space_of(MemoryKind kind) {
    switch (kind) {
    case MemoryKind::VmmPhysical:
        return KeySpace::VmmHandle;
    case MemoryKind::VmmMapping:
        return KeySpace::VmmRange;
    case MemoryKind::VaReservation:
        return KeySpace::VaRange;
    case MemoryKind::Block:
        return KeySpace::BlockSpace;
    default:
        return KeySpace::Pointer;
    }
}

// Kinds whose bytes occupy device memory (as opposed to host memory or mere address space).
constexpr bool occupies_device_memory(MemoryKind kind) {
    return kind == MemoryKind::Device || kind == MemoryKind::Managed || kind == MemoryKind::AsyncPool ||
           kind == MemoryKind::VmmPhysical;
}

// The bytes of those kinds live on a device (an ordinal below kMaxDevices) as the accounting holds them
// now, read while the recorder updates it.
inline uint64_t device_memory_live(const Accounting& accounting, uint32_t device) {
    uint64_t bytes = 0;
    for (uint32_t kind = 0; kind < kKindCount; ++kind)
        if (occupies_device_memory(static_cast<MemoryKind>(kind)))
            bytes += __atomic_load_n(&accounting.live_bytes[device][kind], __ATOMIC_RELAXED);
    return bytes;
}

// The names of the MemoryKind values, indexed by them: JSON's and gpuleak-dump's spelling.
inline constexpr const char* kKindNames[] = {
    "none",       "device",       "managed",     "pinned_host",    "host_registered",
    "async_pool", "vmm_physical", "vmm_mapping", "va_reservation", "block"};
static_assert(sizeof kKindNames / sizeof kKindNames[0] == kKindCount);

constexpr const char* kind_name(MemoryKind kind) {
    const auto index = static_cast<uint32_t>(kind);
    return index < kKindCount ? kKindNames[index] : "none";
}

constexpr bool readable_format_version(uint32_t version) {
    return version >= kOldestReadableFormatVersion && version <= kFormatVersion;
}

// The names of the EventType values, from Alloc (1) on.
inline constexpr const char* kEventTypeNames[] = {
    "alloc",        "free",          "free_unknown", "alloc_failed",      "pool_trim",
    "marker",       "fork",          "source_name",  "python_finalizing", "retainers",
    "thread_start", "program_error", "context"};
static_assert(sizeof kEventTypeNames / sizeof kEventTypeNames[0] ==
              static_cast<uint32_t>(EventType::Context));

constexpr const char* event_type_name(EventType type) {
    const auto index = static_cast<uint32_t>(type);
    return index >= 1 && index <= sizeof kEventTypeNames / sizeof kEventTypeNames[0]
               ? kEventTypeNames[index - 1]
               : "unknown";
}

} // namespace gpuleak::format
#endif
