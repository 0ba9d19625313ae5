#include "recording/recorder.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <pthread.h>
#include <sched.h>
#include <span>
#include <string_view>
#include <unistd.h>

#include "common/warning.h"
#include "gpuleak/gpuleak.h"
#include "python/python_code_object.h"
#include "python/python_frames.h"
#include "python/python_process_target.h"
#include "python/python_runtime.h"
#include "python/python_why.h"
#include "recording/config.h"
#include "recording/driver_view.h"
#include "recording/host_memory_reader.h"
#include "recording/live_table.h"
#include "recording/module_map.h"
#include "recording/monotonic_clock.h"
#include "recording/native_unwind.h"
#include "recording/python_code_table.h"
#include "recording/signal_sender.h"
#include "recording/spill_sites.h"
#include "recording/stack_table.h"
#include "recording/thread_owned.h"
#include "recording/timeline_sampler.h"
#include "recording/trace_writer.h"

namespace gpuleak {

using format::EventRecord;
using format::EventType;
using format::LiveSlot;

namespace {

// Where this process's recording stands. Each thread moves it on with a compare-and-swap, so that one
// thread alone creates or promotes the trace while the others wait (or give up, when they are the one
// doing it: an allocation made by the recorder's own start).
enum class State : int {
    // No trace yet: the process has made no CUDA call, or it is a forked child whose parent's trace is not
    // its own. Its first event (or, for a Python program or a recorded process's child, its start)
    // creates one.
    Idle,
    // One thread creates the trace file and starts the sampler; the others wait for Sampling or Active.
    Starting,
    // A host-only trace: the process has not used CUDA yet (a Python program, a DataLoader worker), or
    // promoting it failed (g_promotion_failed; it stays host-only then). Host memory is sampled.
    Sampling,
    // One thread grows a host-only trace into a whole one at the process's first event; the others wait
    // for Active, or Sampling again when it failed.
    Promoting,
    // A whole trace, recording every event.
    Active,
    // Nothing is recorded: the trace could not be created, or a failed exec could not restore it.
    Off,
};

constinit std::atomic<State> g_state{State::Idle};
constinit std::atomic<bool> g_promotion_failed{false};
constinit Config g_config{};
constinit TraceWriter g_writer;
constinit LiveTable g_live;
constinit SpillSites g_spill;
constinit StackTable g_stacks;
constinit PythonCodeTable g_code;
constinit ModuleMap g_modules;
constinit TimelineSampler g_sampler;
constinit char g_parent_trace[1100] = {};
constinit bool g_process_hooks_installed = false;
constinit std::atomic<bool> g_signal_hooks_installed{false};
// A PythonFinalizing record is in this process's trace (or being added): at most one per trace.
constinit std::atomic<bool> g_python_finalizing_noted{false};
// A bit per device ordinal where the process's context was recorded (EventType::Context).
constinit std::atomic<uint32_t> g_devices_with_context{0};
// gpuleak attach: the trace's name it asked for (used instead of GPULEAK_OUTPUT), empty where the process
// was not attached to; what runs after each sample while it records.
constinit char g_attach_output[kOutputPatternCapacity] = {};
constinit std::atomic<void (*)()> g_attach_each_sample{nullptr};
// One more for each trace an attach begins in this process image: the stack id a thread remembers is
// one of the trace it was interned in.
constinit std::atomic<uint64_t> g_trace_serial{0};
// How many more of its samples the sampler looks for what multiprocessing started this process to run:
// set where multiprocessing may have started it, 0 once found. A spawned interpreter imports for seconds
// before its target runs; a process that never runs one stops costing a walk a sample after this.
constexpr uint32_t kTargetSearchSamples = 1200;
constinit std::atomic<uint32_t> g_target_samples_left{0};

__attribute__((tls_model("initial-exec"))) constinit thread_local int t_hook_depth = 0;
// Set while this thread records an event. A signal handler that interrupted it there and records too
// (the C API called from a handler) would wait forever on a lock its own thread holds: its event is
// dropped and counted instead.
__attribute__((tls_model("initial-exec"))) constinit thread_local bool t_recording = false;
__attribute__((tls_model("initial-exec"))) constinit thread_local bool t_starting = false;

// The stack this thread recorded last and its id: a loop allocating from one place unwinds to the same
// frames again and again, and recognising them costs less than hashing and probing the stack index.
constexpr uint32_t kRememberedFrames = 64;
struct LastStack {
    uint64_t trace_serial;
    uint32_t id;
    uint32_t count;
    uint32_t python_count;
    uint64_t repeat_serial;
    uint64_t frames[kRememberedFrames];
    format::PythonFrameRecord python[kRememberedFrames];
};

// The CUDA allocations that failed on this thread since its last successful allocation, all
// on one device: a sub-allocator that refuses a block next gave up after them (PyTorch tries cudaMalloc
// again after emptying its cache, then raises), and the report shows them as one out-of-memory error.
struct FailedAttempts {
    int16_t device;
    uint32_t count;
};
__attribute__((tls_model("initial-exec"))) constinit thread_local FailedAttempts t_failed_attempts{};

} // namespace

// Where a thread was started: the stack's id where the trace kept stacks then; else (a host-only trace:
// the program had not used CUDA yet) the frames, kept to be recorded at the thread's first allocation.
struct ThreadStart {
    uint32_t stack_id;
    uint32_t native_count;
    uint64_t native[kMaxStackDepthSetting];
    DescribedFrames* python;
};

namespace {

// Where this thread was started (capture_thread_start), until its first allocation records it.
__attribute__((tls_model("initial-exec"))) constinit thread_local ThreadStart* t_thread_start = nullptr;
// This thread's start is in the trace: its end is recorded too.
__attribute__((tls_model("initial-exec"))) constinit thread_local bool t_thread_start_recorded = false;

// Thread starts take at most this share of the notable array: failures, markers and forks come first.
constexpr uint64_t kThreadStartNotableDivisor = 2;

constexpr int kFatalSignals[] = {SIGSEGV, SIGBUS,  SIGABRT, SIGFPE,  SIGILL, SIGTERM, SIGINT,
                                 SIGHUP,  SIGQUIT, SIGXCPU, SIGXFSZ, SIGSYS, SIGPIPE};

// The process has a trace of its own mapped (whole or host-only).
bool has_trace(State state) {
    return state == State::Sampling || state == State::Promoting || state == State::Active;
}

void restore_default_action(int signal_number) {
    struct sigaction default_action {};
    default_action.sa_handler = SIG_DFL;
    sigemptyset(&default_action.sa_mask);
    sigaction(signal_number, &default_action, nullptr);
}

void on_fatal_signal(int signal_number, siginfo_t* info, void*) {
    const State state = g_state.load(std::memory_order_acquire);
    // A trace still being made gets its end too (a pool terminating a worker it just forked): its file
    // shows only once its header is whole, so either it never shows or it shows with the end in it.
    // Not in a vfork child: the trace is its parent's.
    if ((has_trace(state) || (state == State::Starting && g_writer.header() != nullptr)) &&
        g_writer.header()->pid == getpid())
        g_writer.write_end(format::EndState::Signaled, signal_number, signal_sender(info));
    // Delivered by the kernel: SA_RESETHAND restored the default action, and the re-raised signal is
    // delivered when this handler returns (it is blocked until then), so the process dies exactly as it
    // would have without us. Called by a handler the program installed later, that chains to the one it
    // found (crash reporters, runtimes): without gpuleak it would have found the default action, and
    // what chaining to that does is what happens here: the default action set, the signal raised, and
    // delivered when the program's handler returns, not this handler run again.
    struct sigaction current {};
    if (sigaction(signal_number, nullptr, &current) == 0 && current.sa_handler != SIG_DFL)
        restore_default_action(signal_number);
    raise(signal_number);
}

void on_process_exit(int status, void*) {
    record_process_exit(status);
}

bool start_recording(TraceStart how);
format::ForkOrigin fork_origin();

// Lets go of the trace and the tables over it, without writing to it: a forked child's parent's, or an
// earlier attach's.
void forget_trace() {
    g_modules.detach();
    g_stacks.detach();
    g_code.detach();
    g_live.detach_after_fork();
    g_spill.detach();
    g_writer.abandon_after_fork();
}

// An interpreter started for a multiprocessing Process by spawn: spawn's command lines end with this
// argument (multiprocessing/spawn.py, get_command_line).
bool started_by_multiprocessing() {
    const format::FileHeader* header = g_writer.header();
    return header != nullptr && std::string_view(header->command_line, header->command_line_bytes)
                                        .find("--multiprocessing-fork") != std::string_view::npos;
}

} // namespace

void start_over_after_fork(bool record_child) {
    forget_thread_id_after_fork();
    if (LastStack* last = ThreadOwned<LastStack>::get())
        *last = {}; // its id names a stack of the parent's trace
    t_failed_attempts = {};
    // The forking thread's start belongs to its parent's trace, and is left with it.
    t_thread_start = nullptr;
    t_thread_start_recorded = false;
    g_python_finalizing_noted.store(false, std::memory_order_relaxed);
    // The parent's contexts are not the child's: CUDA makes its own, where the child uses it.
    g_devices_with_context.store(0, std::memory_order_relaxed);
    // The parent's sampler may have been installing them as it forked (the flag set, SIGTERM not yet
    // hooked): the child installs what is missing, leaving the handlers it inherited as they are.
    g_signal_hooks_installed.store(false, std::memory_order_relaxed);
    const bool parent_traced = has_trace(g_state.load(std::memory_order_relaxed));
    if (parent_traced)
        std::snprintf(g_parent_trace, sizeof g_parent_trace, "%s", g_writer.path());
    g_sampler.forget_after_fork();
    forget_trace();
    g_promotion_failed.store(false, std::memory_order_relaxed);
    // The child gets its own trace: the parent's allocations are not its own. A copy of a recorded
    // process (a DataLoader worker) is recorded from here for host memory, the rest from its first event.
    g_state.store(State::Idle, std::memory_order_release);
    g_target_samples_left.store(0, std::memory_order_relaxed);
    State idle = State::Idle;
    if (record_child && parent_traced && g_config.all_processes &&
        g_state.compare_exchange_strong(idle, State::Starting, std::memory_order_acq_rel)) {
        // A copy made by multiprocessing (a Process, a Pool's worker, a DataLoader's worker) runs its target
        // next, on this thread.
        if (g_config.python_stacks && fork_origin() != format::ForkOrigin::Unknown)
            g_target_samples_left.store(kTargetSearchSamples, std::memory_order_relaxed);
        start_recording(TraceStart::Fork);
    }
}

void start_recording_if_python() {
    // Only "0" turns it off, as read_config reads the flag (which warns about a malformed value once,
    // when the recording starts).
    const char* all_processes = std::getenv("GPULEAK_ALL_PROCESSES");
    if (!python_program() || (all_processes != nullptr && std::strcmp(all_processes, "0") == 0))
        return;
    State idle = State::Idle;
    if (!g_state.compare_exchange_strong(idle, State::Starting, std::memory_order_acq_rel))
        return;
    start_recording(TraceStart::ProcessStart);
    if (g_config.python_stacks && started_by_multiprocessing())
        g_target_samples_left.store(kTargetSearchSamples, std::memory_order_relaxed);
}

namespace {

// Hooks that belong to the process image, not to one trace: inherited by forked children.
void install_process_hooks() {
    if (g_process_hooks_installed)
        return;
    g_process_hooks_installed = true;
    pthread_atfork(nullptr, nullptr, [] { start_over_after_fork(true); });
    on_exit(on_process_exit, nullptr);
}

// Apart from the process hooks: a Python program's own handlers (SIGINT's KeyboardInterrupt) are
// installed only where it finds the default action when it initializes, so ours wait until then.
void install_signal_hooks() {
    if (g_signal_hooks_installed.exchange(true, std::memory_order_relaxed))
        return;
    for (int signal_number : kFatalSignals) {
        struct sigaction current {};
        // Only where the program left the default action: its own handlers stay untouched.
        if (sigaction(signal_number, nullptr, &current) != 0 || current.sa_handler != SIG_DFL ||
            (current.sa_flags & SA_SIGINFO) != 0)
            continue;
        struct sigaction ours {};
        ours.sa_sigaction = on_fatal_signal;
        sigemptyset(&ours.sa_mask);
        ours.sa_flags = SA_SIGINFO | SA_RESETHAND | SA_ONSTACK;
        sigaction(signal_number, &ours, nullptr);
    }
}

void note_python_finalizing() {
    // A forked child whose recording ended (or never started) has no trace to note it in.
    if (!has_trace(g_state.load(std::memory_order_acquire)) ||
        g_python_finalizing_noted.load(std::memory_order_relaxed) ||
        g_python_finalizing_noted.exchange(true, std::memory_order_relaxed))
        return;
    EventRecord event{};
    event.time_ns = monotonic_ns();
    event.thread_id = current_thread_id();
    event.type = static_cast<uint16_t>(EventType::PythonFinalizing);
    event.size = __atomic_load_n(g_writer.sequence_counter(), __ATOMIC_RELAXED);
    event.device = kUnknownDevice;
    g_writer.append_notable(event);
}

void look_for_python_target() {
    const uint32_t left = g_target_samples_left.load(std::memory_order_relaxed);
    if (left == 0)
        return;
    g_target_samples_left.store(left - 1, std::memory_order_relaxed);
    PythonProcessTarget target;
    if (!find_python_process_target(target))
        return;
    g_target_samples_left.store(0, std::memory_order_relaxed);
    g_writer.write_target({target.filename, target.filename_size}, {target.qualname, target.qualname_size},
                          target.first_line, target.dataloader_worker_id.value_or(-1));
}

// On the sampler's thread, every interval: a program that allocates nothing while it finalizes is seen
// finalizing too, and a multiprocessing child's target is looked for. Only where the walks read Python
// (GPULEAK_PYTHON=0 leaves the interpreter alone).
void after_each_sample() {
    if (!g_signal_hooks_installed.load(std::memory_order_relaxed) && python_initialized())
        install_signal_hooks();
    if (g_config.python_stacks && !g_python_finalizing_noted.load(std::memory_order_relaxed) &&
        python_finalizing())
        note_python_finalizing();
    look_for_python_target();
    if (void (*each_sample)() = g_attach_each_sample.load(std::memory_order_acquire))
        each_sample();
}

// Where the program still has our handlers: the default action again, as before the attach.
void uninstall_signal_hooks() {
    for (int signal_number : kFatalSignals) {
        struct sigaction current {};
        if (sigaction(signal_number, nullptr, &current) != 0 || (current.sa_flags & SA_SIGINFO) == 0 ||
            current.sa_sigaction != on_fatal_signal)
            continue;
        restore_default_action(signal_number);
    }
    g_signal_hooks_installed.store(false, std::memory_order_relaxed);
}

uint64_t count_python_modules() {
    return g_config.python_stacks ? python_module_count() : 0;
}

// What recording events needs beyond the file: the unwinder, the interpreter's layout, the indexes of
// the live table, the stacks and the code objects. False when the live table cannot be indexed.
bool attach_tables() {
    init_native_unwind();
    // Finding the interpreter takes a while, and a thread that asks while another is still looking is
    // told there is none: done here, before any thread records, every stack gets its Python frames.
    if (g_config.python_stacks)
        python_runtime();
    format::FileHeader& header = *g_writer.header();
    const bool spill = g_spill.attach(g_writer.spill_sites(), header.spill_capacity, &header.spill_used);
    if (!spill)
        warn("cannot map memory for the spill index; allocations past the live table are not recorded");
    if (!g_live.attach(g_writer.live_marks(), g_writer.live_slots(), header.live_capacity, &g_writer,
                       spill ? &g_spill : nullptr)) {
        warn("cannot map memory for the live-allocation index; not recording");
        return false;
    }
    if (!g_stacks.attach(g_writer))
        warn("cannot map memory for the stack index; events are recorded without stacks");
    if (!g_code.attach(g_writer))
        warn("cannot map memory for the Python code index; Python frames are recorded without code");
    g_modules.attach(g_writer);
    return true;
}

void announce() {
    if (!g_config.quiet)
        warn("recording GPU memory of pid %d (%s) to %s", g_writer.header()->pid,
             g_writer.header()->command_line_bytes > 0 ? g_writer.header()->command_line : "?",
             g_writer.path());
}

// With the state Starting: creates this process's trace, whole at a first event, else host-only (sampled
// host memory, until the first event promotes it). True when events can be recorded.
bool start_recording(TraceStart how) {
    const bool host_only = how == TraceStart::ProcessStart || how == TraceStart::Fork;
    t_starting = true;
    g_config = read_config();
    if (g_attach_output[0] != '\0') {
        // Nothing of gpuleak's on the program's stderr, also from the children it forks while attached to:
        // their traces go beside the attached one.
        std::memcpy(g_config.output_pattern, g_attach_output, sizeof g_config.output_pattern);
        g_config.quiet = true;
        g_config.attached = how == TraceStart::Attach;
    }
    init_monotonic_clock();
    ProcessIdentity identity{static_cast<int>(getpid()), static_cast<int>(getppid()), g_parent_trace,
                             machine_memory_bytes()};
    // A host-only trace from a Python program's start waits for the interpreter's handlers (the sampler
    // installs ours then); a forked child's interpreter has them already. Before the trace is made: a
    // process killed while it is made (a pool terminating the worker it just forked) still records how.
    if (!host_only || python_initialized())
        install_signal_hooks();
    bool ok = g_writer.create(g_config, identity, host_only);
    // A whole trace whose tables failed records nothing more, as one that could not be made.
    if (ok && !host_only)
        ok = attach_tables();
    if (ok) {
        install_process_hooks();
        g_sampler.start(g_writer, after_each_sample, count_python_modules, how);
        if (!host_only)
            announce();
    }
    State state = State::Off;
    if (ok)
        state = host_only ? State::Sampling : State::Active;
    g_state.store(state, std::memory_order_release);
    t_starting = false;
    return state == State::Active;
}

// With the state Promoting: a host-only trace's process made its first event.
bool promote_recording() {
    t_starting = true;
    const int error = g_writer.promote();
    if (error != 0)
        warn("cannot reserve disk space to record GPU memory in %s: %s; only host memory is recorded",
             g_writer.path(), std::strerror(error));
    const bool ok = error == 0 && attach_tables();
    if (ok) {
        // The program may have set its rank since it started (from SLURM_PROCID, in a spawned worker).
        write_job_identity(*g_writer.header());
        install_signal_hooks();
        announce();
    }
    g_promotion_failed.store(!ok, std::memory_order_relaxed);
    g_state.store(ok ? State::Active : State::Sampling, std::memory_order_release);
    t_starting = false;
    return ok;
}

bool ensure_active() {
    for (;;) {
        State state = g_state.load(std::memory_order_acquire);
        switch (state) {
        case State::Active:
            return true;
        case State::Off:
            return false;
        case State::Idle:
            if (t_starting)
                return false;
            if (g_state.compare_exchange_strong(state, State::Starting, std::memory_order_acq_rel))
                return start_recording(TraceStart::FirstEvent);
            break;
        case State::Sampling:
            if (t_starting || g_promotion_failed.load(std::memory_order_relaxed))
                return false;
            if (g_state.compare_exchange_strong(state, State::Promoting, std::memory_order_acq_rel))
                return promote_recording();
            break;
        case State::Starting:
        case State::Promoting:
            if (t_starting)
                return false;
            sched_yield();
            break;
        }
    }
}

uint32_t accounting_slot(int16_t device) {
    if (device >= 0 && device < static_cast<int16_t>(format::kMaxDevices))
        return static_cast<uint32_t>(device);
    return device == kHostDevice ? format::kHostSlot : format::kUnknownDeviceSlot;
}

void account(const LiveSlot& slot, bool add) {
    format::Accounting& accounting = g_writer.header()->accounting;
    uint32_t where = accounting_slot(slot.device);
    uint64_t* live = &accounting.live_bytes[where][slot.kind];
    if (!add) {
        __atomic_fetch_sub(live, slot.size, __ATOMIC_RELAXED);
        return;
    }
    uint64_t now = __atomic_add_fetch(live, slot.size, __ATOMIC_RELAXED);
    uint64_t* peak = &accounting.peak_bytes[where][slot.kind];
    uint64_t seen = __atomic_load_n(peak, __ATOMIC_RELAXED);
    while (now > seen &&
           !__atomic_compare_exchange_n(peak, &seen, now, true, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
    }
}

// The calling thread's Python frames as the trace keeps them; 0 without Python stacks. A thread that never
// ran Python (TensorFlow's executors) makes memory for the program's line that waits on it: that line's
// frames stand for its own.
uint32_t capture_python_stack(format::PythonFrameRecord* records) {
    if (!g_config.python_stacks)
        return 0;
    PythonFrame frames[kMaxStackDepthSetting];
    bool finalizing = false;
    auto count = static_cast<uint32_t>(capture_python_frames(frames, g_config.stack_depth, finalizing));
    if (finalizing)
        note_python_finalizing();
    if (count == 0 && !finalizing) {
        count = static_cast<uint32_t>(capture_waiting_python_frames(frames, g_config.stack_depth));
        g_code.records_of_other_thread(frames, count, records);
        return count;
    }
    g_code.records_of(frames, count, records);
    return count;
}

// The file name of a frame's code (cut to `buffer`), empty where it cannot be read.
std::string_view python_file_of(const PythonFrame& frame, std::span<char> buffer) {
    char qualname[8];
    uint8_t line_table[8];
    PythonCodeDescription description;
    if (!describe_python_code(frame.code_object, {buffer, qualname, line_table}, description))
        return {};
    return {buffer.data(), description.filename_size};
}

// Whether Python frames that start a thread are threading's Thread.start called by other than a thread
// pool. A pool's threads (concurrent.futures', multiprocessing's), like a native one's (OpenMP's,
// autograd's), serve whatever asks them later, and where they were started says nothing of that.
bool python_thread_start(const PythonFrame* frames, size_t count) {
    char filename[1024];
    char qualname[64];
    uint8_t line_table[8];
    PythonCodeDescription description;
    // 3.10 names functions without their class.
    if (!describe_python_code(frames[0].code_object, {filename, qualname, line_table}, description) ||
        !std::string_view(filename, description.filename_size).ends_with("/threading.py") ||
        (std::string_view(qualname, description.qualname_size) != "Thread.start" &&
         std::string_view(qualname, description.qualname_size) != "start"))
        return false;
    if (count < 2)
        return true;
    const std::string_view caller = python_file_of(frames[1], filename);
    return caller.find("/concurrent/futures/") == std::string_view::npos &&
           caller.find("/multiprocessing/") == std::string_view::npos;
}

// From the file names of the calling thread's Python frames.
format::ForkOrigin fork_origin() {
    if (!g_config.python_stacks)
        return format::ForkOrigin::Unknown;
    PythonFrame frames[kMaxStackDepthSetting];
    bool finalizing = false;
    const size_t count = capture_python_frames(frames, kMaxStackDepthSetting, finalizing);
    format::ForkOrigin origin = format::ForkOrigin::Unknown;
    char filename[1024];
    for (size_t i = 0; i < count; ++i) {
        const std::string_view file = python_file_of(frames[i], filename);
        if (file.ends_with("torch/utils/data/dataloader.py"))
            return format::ForkOrigin::DataLoader;
        if (file.find("multiprocessing/") != std::string_view::npos)
            origin = format::ForkOrigin::Multiprocessing;
    }
    return origin;
}

// The id of a stack of native `frames` and `python` records, with the modules its new frames are in.
uint32_t intern_stack(const uint64_t* frames, uint32_t count, const format::PythonFrameRecord* python,
                      uint32_t python_count) {
    bool added = false;
    const uint32_t id = g_stacks.intern(frames, count, python, python_count, added);
    if (added)
        g_modules.cover(frames, count);
    return id;
}

uint32_t capture_stack() {
    if (g_config.stack_depth == 0)
        return 0;
    uint64_t buffer[kMaxStackDepthSetting];
    const NativeStack stack = capture_native_stack(buffer, g_config.stack_depth);
    format::PythonFrameRecord python[kMaxStackDepthSetting];
    const uint32_t python_count = capture_python_stack(python);
    if (stack.count == 0 && python_count == 0)
        return 0;
    LastStack* remembered = ThreadOwned<LastStack>::get();
    if (remembered == nullptr)
        return intern_stack(stack.frames, stack.count, python, python_count);
    LastStack& last = *remembered;
    if (last.trace_serial != g_trace_serial.load(std::memory_order_relaxed))
        last = {};
    const bool same_python = last.id != 0 && python_count == last.python_count &&
                             std::memcmp(python, last.python, python_count * sizeof(*python)) == 0;
    if (same_python && stack.repeat_serial != 0 && stack.repeat_serial == last.repeat_serial)
        return last.id;
    if (same_python && stack.count == last.count &&
        std::memcmp(stack.frames, last.frames, stack.count * sizeof(uint64_t)) == 0) {
        last.repeat_serial = stack.repeat_serial;
        return last.id;
    }
    const uint32_t id = intern_stack(stack.frames, stack.count, python, python_count);
    if (id != 0 && stack.count <= kRememberedFrames && python_count <= kRememberedFrames) {
        last.trace_serial = g_trace_serial.load(std::memory_order_relaxed);
        last.id = id;
        last.count = stack.count;
        last.python_count = python_count;
        last.repeat_serial = stack.repeat_serial;
        std::memcpy(last.frames, stack.frames, stack.count * sizeof(uint64_t));
        std::memcpy(last.python, python, python_count * sizeof(*python));
    } else {
        last = {};
    }
    return id;
}

EventRecord event_of(EventType type, const LiveSlot& slot) {
    EventRecord event{};
    event.time_ns = slot.time_ns;
    event.address = slot.address;
    event.size = slot.size;
    event.stream = slot.stream;
    event.stack_id = slot.stack_id;
    event.thread_id = slot.thread_id;
    event.type = static_cast<uint16_t>(type);
    event.kind = slot.kind;
    event.api = slot.api;
    event.device = slot.device;
    return event;
}

// An allocation the live table found no memory for: its free will not be matched, so it is not
// counted in the totals either, and the trace says they are short.
void note_untracked() {
    __atomic_fetch_add(&g_writer.header()->live_untracked, 1, __ATOMIC_RELAXED);
    __atomic_fetch_or(&g_writer.header()->flags, static_cast<uint32_t>(format::HeaderFlag::LiveUntracked),
                      __ATOMIC_RELAXED);
}

void release_thread_start(ThreadStart* start) {
    if (start == nullptr)
        return;
    release_described_frames(start->python);
    std::free(start);
}

// The id of a stack kept as frames while the trace kept no stacks.
uint32_t intern_kept_frames(const ThreadStart& start) {
    format::PythonFrameRecord python[kMaxStackDepthSetting];
    const uint32_t python_count =
        start.python != nullptr ? g_code.records_of_described(*start.python, python) : 0;
    if (start.native_count == 0 && python_count == 0)
        return 0;
    return intern_stack(start.native, start.native_count, python, python_count);
}

// A thread's start (stack_id) or end (0), past which its id may name another thread.
void append_thread_mark(uint64_t time_ns, uint32_t stack_id) {
    EventRecord event{};
    event.time_ns = time_ns;
    event.thread_id = current_thread_id();
    event.stack_id = stack_id;
    event.type = static_cast<uint16_t>(EventType::ThreadStart);
    event.device = kUnknownDevice;
    t_thread_start_recorded = g_writer.append_notable(event) && stack_id != 0;
}

// Only a thread that allocates (or fails to) tells where it was started, at `time_ns`, its first
// allocation's: most threads never do.
void append_thread_start(uint64_t time_ns) {
    ThreadStart* start = t_thread_start;
    t_thread_start = nullptr;
    const format::FileHeader& header = *g_writer.header();
    const bool fits = __atomic_load_n(&header.notable_count, __ATOMIC_RELAXED) <
                      header.notable_capacity / kThreadStartNotableDivisor;
    uint32_t stack_id = 0;
    if (fits)
        stack_id = start->stack_id != 0 ? start->stack_id : intern_kept_frames(*start);
    release_thread_start(start);
    if (stack_id != 0)
        append_thread_mark(time_ns, stack_id);
}

// At `sequence` where it was claimed beforehand (LiveTable::insert), at the ring's head otherwise.
void append_free(const LiveSlot& removed, uint64_t stream, uint8_t api,
                 std::optional<uint64_t> sequence = std::nullopt) {
    account(removed, false);
    EventRecord event = event_of(EventType::Free, removed);
    event.time_ns = monotonic_ns();
    event.thread_id = current_thread_id();
    event.stream = stream;
    event.api = api;
    if (sequence)
        g_writer.append_event(event, *sequence);
    else
        g_writer.append_event(event);
}

void append_free_unknown(format::KeySpace space, uint64_t address, uint64_t stream, uint8_t api) {
    __atomic_fetch_add(&g_writer.header()->free_unknown, 1, __ATOMIC_RELAXED);
    EventRecord event{};
    event.time_ns = monotonic_ns();
    event.thread_id = current_thread_id();
    event.address = address;
    event.stream = stream;
    event.type = static_cast<uint16_t>(EventType::FreeUnknown);
    event.api = api;
    event.result = static_cast<int32_t>(space);
    event.device = kUnknownDevice;
    g_writer.append_event(event);
}

// Recording must not change errno under the program's feet (a hooked call that succeeded leaves it
// as the library left it).
class ErrnoGuard {
  public:
    ErrnoGuard() : saved_(errno) {}
    ~ErrnoGuard() { errno = saved_; }
    ErrnoGuard(const ErrnoGuard&) = delete;
    ErrnoGuard& operator=(const ErrnoGuard&) = delete;

  private:
    int saved_;
};

// False in a vfork child: it shares its parent's memory, trace mapping included, until it execs or
// exits, and neither is the parent's end.
bool owns_trace() {
    return has_trace(g_state.load(std::memory_order_acquire)) && g_writer.header()->pid == getpid();
}

} // namespace

namespace {

// What a dropped event was: what memory held (its totals and sites are off by it), or a note beside it.
enum class EventSort : uint8_t { Memory, Note };

// One event at a time per thread (t_recording). Not entered: the thread was recording already, and the
// event is dropped and counted by its sort.
class RecordingScope {
  public:
    explicit RecordingScope(EventSort sort) noexcept : entered_(!t_recording) {
        if (!entered_) {
            if (format::FileHeader* header =
                    has_trace(g_state.load(std::memory_order_acquire)) ? g_writer.header() : nullptr)
                __atomic_fetch_add(sort == EventSort::Memory ? &header->reentry_dropped
                                                             : &header->reentry_dropped_notes,
                                   1, __ATOMIC_RELAXED);
            return;
        }
        t_recording = true;
        // The handler runs on this thread: the flag must be set before anything that takes a lock.
        std::atomic_signal_fence(std::memory_order_seq_cst);
    }
    ~RecordingScope() {
        if (!entered_)
            return;
        std::atomic_signal_fence(std::memory_order_seq_cst);
        t_recording = false;
    }
    RecordingScope(const RecordingScope&) = delete;
    RecordingScope& operator=(const RecordingScope&) = delete;
    [[nodiscard]] bool entered() const noexcept { return entered_; }

  private:
    bool entered_;
};

} // namespace

HookScope::HookScope() noexcept : outermost_(t_hook_depth++ == 0) {}
HookScope::~HookScope() {
    --t_hook_depth;
}
bool HookScope::nested() noexcept {
    return t_hook_depth > 0;
}

namespace {

// Adds the object to the live table and its Alloc event to the ring; returns its time.
uint64_t insert_live(const Allocation& allocation, uint32_t stack_id) {
    LiveSlot entry{};
    entry.stack_id = stack_id;
    entry.address = allocation.address;
    entry.size = allocation.size;
    entry.time_ns = monotonic_ns();
    entry.stream = allocation.stream;
    entry.thread_id = current_thread_id();
    entry.device = allocation.device;
    entry.kind = static_cast<uint8_t>(allocation.kind);
    entry.api = allocation.api;
    LiveSlot replaced{};
    LiveTable::Sequences sequences;
    const LiveTable::InsertResult inserted =
        g_live.insert(entry, &replaced, g_writer.sequence_counter(), &sequences);
    // Its free went by unseen (a path gpuleak does not hook): the new object takes its place.
    if (inserted.replaced)
        append_free(replaced, 0, allocation.api, sequences.replaced_free);
    if (inserted.untracked)
        note_untracked();
    else
        account(entry, true);
    EventRecord event = event_of(EventType::Alloc, entry);
    g_writer.append_event(event, sequences.alloc);
    return entry.time_ns;
}

} // namespace

void record_alloc(const Allocation& allocation) {
    ErrnoGuard errno_guard;
    const RecordingScope recording(EventSort::Memory);
    if (!recording.entered() || !ensure_active())
        return;
    const uint64_t time_ns = insert_live(allocation, capture_stack());
    t_failed_attempts.count = 0;
    if (t_thread_start != nullptr)
        append_thread_start(time_ns);
    if (g_config.python_stacks &&
        (format::occupies_device_memory(allocation.kind) || allocation.kind == MemoryKind::Block))
        why_at_exit_once_holding(note_python_finalizing, record_program_error,
                                 (g_config.why_moments & GPULEAK_WHY_EXIT) != 0);
}

namespace {

void append_failure(const Allocation& attempt, int32_t error, uint64_t free_bytes) {
    EventRecord event{};
    event.time_ns = monotonic_ns();
    event.size = attempt.size;
    event.stream = attempt.stream;
    event.stack_id = capture_stack();
    event.thread_id = current_thread_id();
    event.type = static_cast<uint16_t>(EventType::AllocFailed);
    event.address = free_bytes;
    event.kind = static_cast<uint8_t>(attempt.kind);
    event.api = attempt.api;
    event.device = attempt.device;
    event.result = error;
    g_writer.append_event(event);
    g_writer.append_notable(event);
    if (t_thread_start != nullptr)
        append_thread_start(event.time_ns);
}

} // namespace

void record_alloc_failure(const Allocation& attempt, int32_t error, uint64_t free_bytes) {
    ErrnoGuard errno_guard;
    const RecordingScope recording(EventSort::Memory);
    if (!recording.entered() || !ensure_active())
        return;
    append_failure(attempt, error, free_bytes);
    FailedAttempts& failed = t_failed_attempts;
    if (failed.count == 0 || failed.device != attempt.device)
        failed = {attempt.device, 0};
    ++failed.count;
}

void record_block_refusal(uint64_t size, int16_t device, uint64_t free_bytes) {
    ErrnoGuard errno_guard;
    const RecordingScope recording(EventSort::Memory);
    if (!recording.entered() || !ensure_active())
        return;
    FailedAttempts& failed = t_failed_attempts;
    const uint64_t gave_up_after = failed.count != 0 && failed.device == device ? failed.count : 0;
    failed.count = 0;
    append_failure({MemoryKind::Block, 0, size, device, gave_up_after, kPublicApi}, format::kAllocatorRefused,
                   free_bytes);
}

PendingFree begin_free(format::KeySpace space, uint64_t address) {
    ErrnoGuard errno_guard;
    PendingFree pending;
    const RecordingScope recording(EventSort::Memory);
    if (!recording.entered() || !ensure_active())
        return pending;
    pending.active = true;
    pending.space = space;
    pending.address = address;
    pending.found = g_live.remove(space, address, &pending.entry);
    return pending;
}

void end_free(const PendingFree& pending, bool succeeded, uint64_t stream, uint8_t api) {
    ErrnoGuard errno_guard;
    if (!pending.active || g_state.load(std::memory_order_acquire) != State::Active)
        return;
    const RecordingScope recording(EventSort::Memory);
    if (!recording.entered())
        return;
    if (!succeeded) {
        if (pending.found) {
            LiveSlot replaced{};
            const LiveTable::InsertResult inserted = g_live.insert(pending.entry, &replaced);
            if (inserted.replaced)
                append_free(replaced, 0, api);
            if (inserted.untracked) {
                account(pending.entry, false);
                note_untracked();
            }
        }
        return;
    }
    if (pending.found)
        append_free(pending.entry, stream, api);
    else
        append_free_unknown(pending.space, pending.address, stream, api);
}

void record_free(format::KeySpace space, uint64_t address, uint64_t stream, uint8_t api) {
    end_free(begin_free(space, address), true, stream, api);
}

namespace {

// What the program held on each device when the driver was last asked about it, and when (CLOCK_MONOTONIC;
// 0: never). Claimed by the thread that asks, so that two threads do not both ask.
struct DriverAnswers {
    std::array<std::atomic<uint64_t>, format::kMaxDevices> held{};
    std::array<std::atomic<uint64_t>, format::kMaxDevices> time_ns{};
};
constinit DriverAnswers g_driver_answers;

} // namespace

bool claim_driver_view(int16_t device) {
    if (device < 0 || device >= static_cast<int16_t>(format::kMaxDevices) ||
        g_state.load(std::memory_order_acquire) != State::Active)
        return false;
    __attribute__((tls_model("initial-exec"))) static thread_local uint32_t calls = 0;
    const auto index = static_cast<size_t>(device);
    const uint64_t held =
        format::device_memory_live(g_writer.header()->accounting, static_cast<uint32_t>(device));
    const bool moved = driver_view_moved(held, g_driver_answers.held[index].load(std::memory_order_relaxed));
    if (!moved && calls++ % kDriverViewCallsBetweenClockReads != 0)
        return false;
    const uint64_t now = monotonic_ns();
    uint64_t then = g_driver_answers.time_ns[index].load(std::memory_order_relaxed);
    const uint64_t since = then == 0 ? UINT64_MAX : now - std::min(now, then);
    if (!driver_view_due(since, moved) ||
        !g_driver_answers.time_ns[index].compare_exchange_strong(then, now, std::memory_order_relaxed))
        return false;
    // Whether or not the driver answers: one that cannot is not asked again at every move.
    g_driver_answers.held[index].store(held, std::memory_order_relaxed);
    return true;
}

void record_device_memory(int16_t device, uint64_t free_bytes, uint64_t total_bytes) {
    ErrnoGuard errno_guard;
    if (device < 0 || device >= static_cast<int16_t>(format::kMaxDevices) || !ensure_active())
        return;
    format::DeviceMemoryView& view = g_writer.header()->device_memory[device];
    __atomic_store_n(&view.last_free_bytes, free_bytes, __ATOMIC_RELAXED);
    __atomic_store_n(&view.last_time_ns, monotonic_ns(), __ATOMIC_RELAXED);
    if (__atomic_load_n(&view.total_bytes, __ATOMIC_ACQUIRE) == 0) {
        __atomic_store_n(&view.lowest_free_bytes, free_bytes, __ATOMIC_RELAXED);
        __atomic_store_n(&view.total_bytes, total_bytes, __ATOMIC_RELEASE);
        return;
    }
    uint64_t lowest = __atomic_load_n(&view.lowest_free_bytes, __ATOMIC_RELAXED);
    while (free_bytes < lowest && !__atomic_compare_exchange_n(&view.lowest_free_bytes, &lowest, free_bytes,
                                                               true, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
    }
}

void record_free_range(format::KeySpace space, uint64_t address, uint64_t size, uint8_t api) {
    ErrnoGuard errno_guard;
    const RecordingScope recording(EventSort::Memory);
    if (!recording.entered() || !ensure_active())
        return;
    const uint64_t end = address + size < address ? UINT64_MAX : address + size;
    bool any = false;
    LiveSlot removed{};
    for (uint64_t cursor = address; cursor < end;) {
        // Mappings are usually unmapped one at a time at their own address: try that before scanning.
        if (!g_live.remove(space, cursor, &removed) && !g_live.remove_first_in(space, cursor, end, &removed))
            break;
        append_free(removed, 0, api);
        any = true;
        cursor = removed.address + (removed.size > 0 ? removed.size : 1);
    }
    if (!any)
        append_free_unknown(space, address, 0, api);
}

void record_pool_trim(uint64_t pool, uint64_t keep_bytes, uint8_t api) {
    ErrnoGuard errno_guard;
    const RecordingScope recording(EventSort::Note);
    if (!recording.entered() || !ensure_active())
        return;
    EventRecord event{};
    event.time_ns = monotonic_ns();
    event.address = pool;
    event.size = keep_bytes;
    event.thread_id = current_thread_id();
    event.type = static_cast<uint16_t>(EventType::PoolTrim);
    event.api = api;
    event.device = kUnknownDevice;
    g_writer.append_event(event);
}

void record_context(int device, const DeviceUuid& uuid, uint8_t api) {
    ErrnoGuard errno_guard;
    if (device < 0 || device >= static_cast<int>(format::kMaxDevices))
        return;
    const uint32_t bit = 1u << device;
    if ((g_devices_with_context.fetch_or(bit, std::memory_order_relaxed) & bit) != 0)
        return;
    const RecordingScope recording(EventSort::Memory);
    if (!recording.entered() || !ensure_active())
        return;
    EventRecord event{};
    event.time_ns = monotonic_ns();
    event.stack_id = capture_stack();
    event.thread_id = current_thread_id();
    event.type = static_cast<uint16_t>(EventType::Context);
    event.api = api;
    event.device = static_cast<int16_t>(device);
    std::memcpy(&event.address, uuid.bytes.data(), sizeof event.address);
    std::memcpy(&event.size, uuid.bytes.data() + sizeof event.address, sizeof event.size);
    g_writer.append_notable(event);
}

void record_marker(const char* label) {
    ErrnoGuard errno_guard;
    if (label == nullptr)
        return;
    const RecordingScope recording(EventSort::Note);
    if (!recording.entered() || !ensure_active())
        return;
    EventRecord event{};
    event.time_ns = monotonic_ns();
    event.address = g_writer.add_string(label, strnlen(label, 1023));
    event.thread_id = current_thread_id();
    event.type = static_cast<uint16_t>(EventType::Marker);
    event.api = kPublicApi;
    event.device = kUnknownDevice;
    g_writer.append_event(event);
    g_writer.append_notable(event);
}

namespace {

// A record of the C API for the notable array only, made now by this thread.
void append_public_note(EventRecord& event, EventType type) {
    event.time_ns = monotonic_ns();
    event.thread_id = current_thread_id();
    event.type = static_cast<uint16_t>(type);
    event.api = kPublicApi;
    event.device = kUnknownDevice;
    g_writer.append_notable(event);
}

} // namespace

void record_source_name(const char* file, const char* name, const char* text) {
    // Limits of gpuleak.h: a path, a label, and what a notebook cell's text takes, so that a few
    // thousand cells fit the strings region of a default trace.
    constexpr size_t kMaxFileBytes = 4095;
    constexpr size_t kMaxNameBytes = 1023;
    constexpr size_t kMaxTextBytes = 65535;
    ErrnoGuard errno_guard;
    if (file == nullptr || name == nullptr)
        return;
    const RecordingScope recording(EventSort::Note);
    if (!recording.entered() || !ensure_active())
        return;
    EventRecord event{};
    event.address = g_writer.add_string(file, strnlen(file, kMaxFileBytes));
    event.size = g_writer.add_string(name, strnlen(name, kMaxNameBytes));
    // Without a file or a name the record says nothing; without the text it still names the frames.
    if (event.address == 0 || event.size == 0)
        return;
    if (text != nullptr)
        event.stream = g_writer.add_string(text, strnlen(text, kMaxTextBytes));
    append_public_note(event, EventType::SourceName);
}

void record_retainers(const char* label, const char* document) {
    // Limits of gpuleak.h: a marker's label, and a document gpuleak.why() keeps to its largest holders.
    constexpr size_t kMaxLabelBytes = 1023;
    constexpr size_t kMaxDocumentBytes = 16383;
    ErrnoGuard errno_guard;
    if (label == nullptr || document == nullptr)
        return;
    const RecordingScope recording(EventSort::Note);
    if (!recording.entered() || !ensure_active())
        return;
    // The strings region's second half is left to markers and notebook cells: records taken at every phase's
    // end of a long run stop there, counted among the strings dropped.
    format::FileHeader& header = *g_writer.header();
    const size_t document_bytes = strnlen(document, kMaxDocumentBytes);
    if (__atomic_load_n(&header.strings_used, __ATOMIC_RELAXED) + document_bytes > header.strings.size / 2) {
        __atomic_fetch_add(&header.strings_dropped, 1, __ATOMIC_RELAXED);
        return;
    }
    EventRecord event{};
    event.address = g_writer.add_string(label, strnlen(label, kMaxLabelBytes));
    event.size = g_writer.add_string(document, document_bytes);
    if (event.address == 0 || event.size == 0)
        return;
    event.stream = __atomic_load_n(g_writer.sequence_counter(), __ATOMIC_RELAXED);
    append_public_note(event, EventType::Retainers);
}

namespace {

// The document python_why.cpp makes: a message of at most 4000 characters and 64 frames of paths.
void append_program_error(const char* document) {
    constexpr size_t kMaxDocumentBytes = 65535;
    EventRecord event{};
    event.address = g_writer.add_string(document, strnlen(document, kMaxDocumentBytes));
    if (event.address != 0)
        append_public_note(event, EventType::ProgramError);
}

// A cell's exception: each cell that raised has its record.
void record_cell_error(const char* document) {
    ErrnoGuard errno_guard;
    if (document == nullptr)
        return;
    const RecordingScope recording(EventSort::Note);
    if (recording.entered() && ensure_active())
        append_program_error(document);
}

} // namespace

void record_program_error(const char* document) {
    static std::atomic<bool> recorded{false};
    ErrnoGuard errno_guard;
    if (document == nullptr)
        return;
    const RecordingScope recording(EventSort::Note);
    if (!recording.entered() || !ensure_active() || recorded.exchange(true, std::memory_order_relaxed))
        return;
    append_program_error(document);
}

void note_cell_error(const char* cell) {
    // GPULEAK_PYTHON=0 leaves the interpreter alone; a process without a trace has nowhere to record.
    if (cell != nullptr && g_config.python_stacks && has_trace(g_state.load(std::memory_order_acquire)))
        why_cell_error(cell, record_cell_error);
}

uint32_t why_moments() {
    return has_trace(g_state.load(std::memory_order_acquire)) ? g_config.why_moments : 0;
}

void note_out_of_memory(int device) {
    // GPULEAK_PYTHON=0 leaves the interpreter alone; a process without a trace has nowhere to record.
    if (g_config.python_stacks && (why_moments() & GPULEAK_WHY_OUT_OF_MEMORY) != 0)
        why_at_out_of_memory(device);
}

namespace {

// The calling thread's Python stack alone, for a vfork child: libunwind keeps state of its own (the pipe
// it checks addresses through, reopened where it finds it closed, as a child that closed its inherited
// files does), and a vfork child would change it under its parent, which then waits on another file.
uint32_t capture_python_only_stack() {
    format::PythonFrameRecord python[kMaxStackDepthSetting];
    const uint32_t count = capture_python_stack(python);
    const uint64_t no_frames[1] = {};
    return count == 0 ? 0 : intern_stack(no_frames, 0, python, count);
}

// Which of the forking thread's stacks a fork keeps, where the trace keeps stacks: none, the whole of it,
// or its Python stack alone.
enum class ForkStack { None, Whole, PythonOnly };

void append_fork(State state, int child_pid, uint64_t forked_ns, uint32_t thread_id, ForkStack stack) {
    EventRecord event{};
    event.time_ns = forked_ns;
    event.address = static_cast<uint64_t>(child_pid);
    event.thread_id = thread_id;
    event.type = static_cast<uint16_t>(EventType::Fork);
    event.device = kUnknownDevice;
    // What forked says what the child is (a DataLoader's worker); a host-only trace keeps no stacks, so
    // it is told here.
    event.result = static_cast<int32_t>(fork_origin());
    if (state == State::Active) {
        event.stack_id = stack == ForkStack::Whole        ? capture_stack()
                         : stack == ForkStack::PythonOnly ? capture_python_only_stack()
                                                          : 0;
        g_writer.append_event(event);
    }
    g_writer.append_notable(event);
}

// The vfork child whose exec was last recorded: the retries of one exec along PATH are recorded once.
// The child shares the variable with its parent, as it shares the rest.
std::atomic<pid_t> g_vfork_child_recorded{0};

// A vfork child runs on its parent's memory, recorder included, until it execs. vfork cannot be hooked
// (the child would return into a frame its parent still needs), so the parent's trace records the child
// at its exec, as a fork: what started it (multiprocessing's spawn, a DataLoader's worker) and from which
// line. Signals are held off meanwhile: the child must not die holding a lock of its parent's recorder
// (CPython's child has restored the default actions). It keeps its parent thread's cached id as it finds
// it, takes no stack from inside a hook, whose locks its suspended parent thread may hold, and no native
// stack at all (capture_python_only_stack).
void record_vfork_child(State state) {
    const pid_t child = getpid();
    if (g_vfork_child_recorded.exchange(child, std::memory_order_relaxed) == child)
        return;
    sigset_t all;
    sigset_t before;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &before);
    append_fork(state, static_cast<int>(child), monotonic_ns(), cached_thread_id(),
                HookScope::nested() ? ForkStack::None : ForkStack::PythonOnly);
    pthread_sigmask(SIG_SETMASK, &before, nullptr);
}

} // namespace

ThreadStart* capture_thread_start() {
    // One started inside a hook is the CUDA library's own; one started while this thread records is
    // gpuleak's (the sampler).
    if (t_recording || t_starting || HookScope::nested() || !g_config.python_stacks ||
        g_config.stack_depth == 0)
        return nullptr;
    const State state = g_state.load(std::memory_order_acquire);
    // Quietly: a process only sampled for host memory says nothing of an unsupported Python.
    if ((state != State::Active && state != State::Sampling) || python_runtime(true) == nullptr)
        return nullptr;
    ErrnoGuard errno_guard;
    const RecordingScope recording(EventSort::Note);
    if (!recording.entered())
        return nullptr;
    PythonFrame frames[kMaxStackDepthSetting];
    bool finalizing = false;
    const auto count = static_cast<uint32_t>(capture_python_frames(frames, g_config.stack_depth, finalizing));
    if (count == 0 || finalizing || !python_thread_start(frames, count))
        return nullptr;
    auto* start = static_cast<ThreadStart*>(std::calloc(1, sizeof(ThreadStart)));
    if (start == nullptr)
        return nullptr;
    uint64_t buffer[kMaxStackDepthSetting];
    const NativeStack native = capture_native_stack(buffer, g_config.stack_depth);
    if (state == State::Active) {
        format::PythonFrameRecord python[kMaxStackDepthSetting];
        g_code.records_of(frames, count, python);
        start->stack_id = intern_stack(native.frames, native.count, python, count);
    } else {
        start->native_count = native.count;
        std::memcpy(start->native, native.frames, native.count * sizeof(uint64_t));
        start->python = describe_frames(frames, count);
    }
    if (start->stack_id == 0 && start->native_count == 0 && start->python == nullptr) {
        release_thread_start(start);
        return nullptr;
    }
    return start;
}

void begin_started_thread(ThreadStart* start) {
    t_thread_start = start;
}

void end_started_thread() {
    release_thread_start(t_thread_start);
    t_thread_start = nullptr;
    if (!t_thread_start_recorded)
        return;
    t_thread_start_recorded = false;
    ErrnoGuard errno_guard;
    const RecordingScope recording(EventSort::Note);
    if (recording.entered() && owns_trace())
        append_thread_mark(monotonic_ns(), 0);
}

void forget_thread_start(ThreadStart* start) {
    release_thread_start(start);
}

void record_fork(int child_pid, uint64_t forked_ns) {
    ErrnoGuard errno_guard;
    const State state = g_state.load(std::memory_order_acquire);
    const RecordingScope recording(EventSort::Note);
    if (recording.entered() && has_trace(state))
        append_fork(state, child_pid, forked_ns, current_thread_id(), ForkStack::Whole);
}

void record_process_exit(int status) {
    ErrnoGuard errno_guard;
    if (!owns_trace())
        return;
    g_sampler.sample_now(SampleMoment::Exit);
    g_writer.write_end(format::EndState::Exited, status);
}

void record_exec() {
    ErrnoGuard errno_guard;
    const State state = g_state.load(std::memory_order_acquire);
    if (has_trace(state) && g_writer.header()->pid != getpid()) {
        record_vfork_child(state);
        return;
    }
    if (!owns_trace())
        return;
    // An image that never used CUDA and runs another program leaves nothing: a fork that execs a tool,
    // an interpreter that launches the real program. An exec may be one of several tried along PATH:
    // no reading of USS and PSS here.
    if (g_writer.host_only()) {
        g_writer.remove_for_exec();
        return;
    }
    g_sampler.sample_now(SampleMoment::Exec);
    g_writer.write_end(format::EndState::Exec, 0);
}

void record_exec_failed() {
    ErrnoGuard errno_guard;
    if (!owns_trace())
        return;
    bool restored = true;
    g_sampler.without_samples([&] { restored = g_writer.restore_after_failed_exec(); });
    if (!restored) {
        g_state.store(State::Off, std::memory_order_release);
        return;
    }
    g_writer.clear_end();
}

int16_t live_device_of(format::KeySpace space, uint64_t address) {
    LiveSlot found{};
    if (g_state.load(std::memory_order_acquire) == State::Active && g_live.find(space, address, &found))
        return found.device;
    return kUnknownDevice;
}

bool recording_active() {
    return ensure_active();
}

const char* trace_path() {
    return recording_active() ? g_writer.path() : nullptr;
}

AttachOutcome attach_recording(const char* output_pattern, void (*after_each_sample)()) {
    State state = g_state.load(std::memory_order_acquire);
    if ((state != State::Idle && state != State::Off) ||
        !g_state.compare_exchange_strong(state, State::Starting, std::memory_order_acq_rel))
        return AttachOutcome::Recording;
    if (state == State::Off) {
        // An earlier attach's trace, ended and no longer sampled (or none, where it could not be made):
        // unmapped only now, long after any hook that was still inside it when it detached.
        forget_trace();
        g_python_finalizing_noted.store(false, std::memory_order_relaxed);
        g_devices_with_context.store(0, std::memory_order_relaxed);
        g_promotion_failed.store(false, std::memory_order_relaxed);
    }
    g_trace_serial.fetch_add(1, std::memory_order_relaxed);
    std::snprintf(g_attach_output, sizeof g_attach_output, "%s", output_pattern);
    g_attach_each_sample.store(after_each_sample, std::memory_order_release);
    return start_recording(TraceStart::Attach) ? AttachOutcome::Attached : AttachOutcome::NoTrace;
}

bool recording_attached() {
    return g_config.attached && g_state.load(std::memory_order_acquire) == State::Active;
}

void record_before_attach(MemoryKind kind, uint64_t address, uint64_t size, int16_t device) {
    ErrnoGuard errno_guard;
    const RecordingScope recording(EventSort::Memory);
    if (!recording.entered() || !g_config.attached || !ensure_active())
        return;
    // Made since the attach already (the allocator's first segment, where the adapter attached only then):
    // recorded with its stack when it was made.
    if (live_device_of(format::key_space_of(kind), address) != kUnknownDevice)
        return;
    insert_live({kind, address, size, device, 0, format::kBeforeAttachApi}, 0);
}

bool detach_recording() {
    if (g_state.load(std::memory_order_acquire) != State::Active || !g_config.attached ||
        g_writer.header()->pid != getpid())
        return false;
    // Hooks that find the state Off pass their calls through; one already past that check may still
    // add its event, after the end, which the trace keeps as any other.
    g_state.store(State::Off, std::memory_order_release);
    g_attach_each_sample.store(nullptr, std::memory_order_release);
    g_sampler.sample_now();
    g_sampler.stop();
    g_writer.write_end(format::EndState::Detached, 0);
    uninstall_signal_hooks();
    return true;
}

} // namespace gpuleak
