// What the hooks tell the recorder. Every function is safe to call from any thread, at any time
// (before initialisation, after fork, during exit), never blocks on I/O in the common case, never
// allocates heap memory on the hot path, and never calls back into CUDA or into the hooks.
#pragma once

#include <array>
#include <cstdint>

#include "gpuleak/trace_format.h"

namespace gpuleak {

using format::KeySpace;
using format::MemoryKind;

inline constexpr int16_t kHostDevice = -1;
inline constexpr int16_t kUnknownDevice = -2;
inline constexpr uint8_t kPublicApi = 255;

struct Allocation {
    MemoryKind kind;
    uint64_t address;
    uint64_t size;
    int16_t device;
    uint64_t stream;
    uint8_t api; // index of the entry point in cuda_entry_points.def, kPublicApi for the C API
};

// A successful allocation: captures the caller's stack and adds the object to the live set.
void record_alloc(const Allocation& allocation);

// A failed allocation attempt (size = requested bytes): captures the stack; an OOM site. `free_bytes`
// is the device's free memory per the driver then, kUnknownFreeBytes when it could not be asked.
inline constexpr uint64_t kUnknownFreeBytes = UINT64_MAX;
void record_alloc_failure(const Allocation& attempt, int32_t error, uint64_t free_bytes);

// A sub-allocator refused a block of `size` bytes (gpuleak_block_alloc_failed): a failure of kind Block,
// which names the failed allocations of device memory that this thread made just before on `device`
// (see EventType::AllocFailed).
void record_block_refusal(uint64_t size, int16_t device, uint64_t free_bytes);

// A device's UUID as its driver gave it; all zero: unknown.
struct DeviceUuid {
    std::array<uint8_t, 16> bytes;
};

// The process has a context on `device`: the first time for that device, records where it was made
// (EventType::Context). Safe inside another hook's call (the runtime makes its context there).
void record_context(int device, const DeviceUuid& uuid, uint8_t api);

// The driver's view of a device's memory, asked by the hooks now and then.
void record_device_memory(int16_t device, uint64_t free_bytes, uint64_t total_bytes);
// Whether the hooks should ask the driver about `device` now (driver_view.h); true claims the question,
// and record_device_memory then takes the answer.
bool claim_driver_view(int16_t device);

// A free in two steps around the real call. begin_free takes the object at `address` in `space` out of
// the live set before the memory goes back to CUDA (so no other thread can be handed the address and
// record it first); end_free records the free when the call succeeded and puts the object back when
// it failed.
struct PendingFree {
    bool active = false; // false when nothing is to be recorded (not recording, or a null pointer)
    bool found = false;  // the object was live
    KeySpace space = KeySpace::Pointer;
    uint64_t address = 0;
    format::LiveSlot entry{};
};
PendingFree begin_free(KeySpace space, uint64_t address);
void end_free(const PendingFree& pending, bool succeeded, uint64_t stream, uint8_t api);

// A free known to succeed (a sub-allocator's block): begin_free and end_free at once.
void record_free(KeySpace space, uint64_t address, uint64_t stream, uint8_t api);

// A successful release of every object of `space` inside [address, address + size).
void record_free_range(KeySpace space, uint64_t address, uint64_t size, uint8_t api);

// A pool trimmed down to `keep_bytes`.
void record_pool_trim(uint64_t pool, uint64_t keep_bytes, uint8_t api);

// A marker with a copy of `label`.
void record_marker(const char* label);

// That Python code compiled under `file` is the source `text`, called `name` (gpuleak_name_source):
// copies of the three in the strings region and a SourceName record in the notable array.
void record_source_name(const char* file, const char* name, const char* text);

// What keeps the device memory alive, as gpuleak.why() found it (gpuleak_retainers): copies of the label
// and the document in the strings region and a Retainers record in the notable array.
void record_retainers(const char* label, const char* document);

// The Python program's code ended with an exception no code caught: a copy of `document` (format::
// EventType::ProgramError's) in the strings region and a ProgramError record in the notable array, once.
void record_program_error(const char* document);

// A notebook's cell ended with an exception, which IPython showed (gpuleak_cell_error): where the process
// records and reads Python, its document (ProgramError's, with the cell's name in it) is made from the
// exception the interpreter holds as the last one shown, and recorded, each time. Under the GIL.
void note_cell_error(const char* cell);

// GPULEAK_WHY's moments (GPULEAK_WHY_* bits) in a process that records; 0 before it records.
uint32_t why_moments();

// A sub-allocator is about to raise an out-of-memory error on `device` (gpuleak_out_of_memory): what held
// the memory is looked for and recorded (python_why.h) where the process records and reads Python.
void note_out_of_memory(int device);

// Where the calling thread is starting a Python thread (threading's Thread.start, not a thread pool's),
// kept by the new thread until its first allocation records it (EventType::ThreadStart); null for any
// other thread, or where the process does not record Python stacks. A thread a library starts (PyTorch's
// pin-memory thread, started at the loop that takes its batches) runs none of the program's code: the line
// that started it is the program's for what it makes.
struct ThreadStart;
ThreadStart* capture_thread_start();

// On the thread just started, before it runs: it owns `start` from then on.
void begin_started_thread(ThreadStart* start);

// The started thread ends: a start its allocations never recorded is let go, and one they recorded is
// closed (its id may be another thread's next).
void end_started_thread();

// The thread could not be started.
void forget_thread_start(ThreadStart* start);

// The process forked `child_pid` at `forked_ns` (monotonic_ns() before the fork), with what forked it
// (recorded only when this process already has a trace).
void record_fork(int child_pid, uint64_t forked_ns);

// In a forked child: forgets the parent's trace and, when the parent had one and `record_child`, starts a
// host-only trace of the child's own. A pthread_atfork handler does this after fork(); a fork that skips
// those handlers (_Fork) calls it without `record_child`: glibc reset none of its locks for the child,
// so making a file and a thread there could deadlock.
void start_over_after_fork(bool record_child);

// At load: a Python program is recorded from its start, for host memory until it uses CUDA
// (GPULEAK_ALL_PROCESSES).
void start_recording_if_python();

// gpuleak attach, in a process that libgpuleak.so was loaded into while it ran: starts a whole trace now,
// named by `output_pattern` (GPULEAK_OUTPUT's form), marked as attached; nothing goes to the program's
// stderr. `after_each_sample` runs on the sampler's thread after each of its samples. Also after an
// earlier attach was detached.
enum class AttachOutcome { Attached, Recording, NoTrace };
AttachOutcome attach_recording(const char* output_pattern, void (*after_each_sample)());

// Whether gpuleak attach began the recording under way (attach_recording, not yet detached).
bool recording_attached();

// An object that was live when gpuleak attach began recording (a PyTorch segment or block, from its
// allocator's snapshot): recorded as made now, without a stack, marked format::kBeforeAttachApi.
void record_before_attach(MemoryKind kind, uint64_t address, uint64_t size, int16_t device);

// Ends what attach_recording began, with EndState::Detached: nothing is recorded from then on, no sample
// is taken, and the fatal-signal handlers it installed are taken down again. False when it is not
// recording so.
bool detach_recording();

// The process is ending through exit(), _exit() or _Exit() with `status`.
void record_process_exit(int status);

// The process is about to replace its image (exec); when the exec fails, record_exec_failed takes
// that back. In a vfork child it records the child in its parent's trace instead.
void record_exec();
void record_exec_failed();

// The device a live object was charged to, kUnknownDevice when it is not live.
int16_t live_device_of(KeySpace space, uint64_t address);

// True while this thread is inside a hook: nested CUDA calls (a runtime call reaching the driver)
// are passed through without being recorded a second time.
class HookScope {
  public:
    HookScope() noexcept;
    ~HookScope();
    HookScope(const HookScope&) = delete;
    HookScope& operator=(const HookScope&) = delete;
    [[nodiscard]] bool outermost() const noexcept { return outermost_; }
    // True when the calling thread is already inside a hook (before constructing a scope of its own).
    [[nodiscard]] static bool nested() noexcept;

  private:
    bool outermost_;
};

// Whether this process is recording (its trace file exists and is mapped) and the file's path.
bool recording_active();
const char* trace_path();

} // namespace gpuleak
