// The process's trace file: created once per process, mapped MAP_SHARED so that every store is in the
// page cache at once (a SIGKILL loses nothing already written), laid out as trace_format.h says.
// This class owns the mapping and the append primitives; what is appended is the recorder's business.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "gpuleak/trace_format.h"
#include "recording/config.h"
#include "recording/spin_lock.h"

namespace gpuleak {

struct Layout {
    format::Region timeline, notable, modules, strings, stacks, code, spill, ring, live;
    uint64_t spill_capacity, notable_capacity, timeline_capacity, ring_capacity, live_capacity;
    uint64_t file_bytes;
    // Reserved on disk at creation: all but the live slots, which are reserved as they are used.
    uint64_t reserved_bytes;
    // A host-only trace's length: the header, the timeline and the notable array.
    uint64_t host_only_bytes;
};

// Splits a file of at most `max_bytes` into regions. The ring gets an eighth, rounded down to a power
// of two records so that a sequence number maps to a slot with a mask; the live table what the others
// leave.
Layout compute_layout(uint64_t max_bytes);

struct ProcessIdentity {
    int pid;
    int ppid;
    const char* parent_trace;       // may be empty
    uint64_t host_memory_bytes = 0; // 0: unknown
};

// Writes into `header` the job the process runs in, as its environment says now: the distributed
// launcher's RANK, LOCAL_RANK and WORLD_SIZE, the machine's rank, Slurm's task and the job's id.
void write_job_identity(format::FileHeader& header);

class TraceWriter {
  public:
    // Creates the file named by the configured pattern (adding ".1", ".2", ... when the name is taken),
    // reserves its whole size on disk (a host-only trace: the part before the modules), maps it and
    // writes the header. False (with one warning) when the file cannot be made; the process then runs
    // on unrecorded.
    bool create(const Config& config, const ProcessIdentity& identity, bool host_only = false);
    // Makes a host-only trace whole: lengthens the file, reserves the rest and clears HostOnly. 0, or the
    // error (as reserve_live_slots'). Not thread-safe: the recorder's promotion runs once.
    int promote();
    [[nodiscard]] bool host_only() const;
    // A host-only trace's process is about to exec: the new program is not the one this trace is of (a
    // fork that runs another program, a launcher), so the file goes; restore_after_failed_exec makes it
    // again, with what it held, and maps it in the old one's place, when the exec fails. False when that
    // failed: the mapping is gone, nothing may be written to it.
    void remove_for_exec();
    bool restore_after_failed_exec();

    // Forgets the mapping without touching the file: used in a forked child, which must never write
    // into its parent's trace.
    void abandon_after_fork();

    [[nodiscard]] bool mapped() const { return header_ != nullptr; }
    [[nodiscard]] const char* path() const { return path_; }
    [[nodiscard]] format::FileHeader* header() const { return header_; }
    [[nodiscard]] format::LiveStripeMarks* live_marks() const;
    [[nodiscard]] format::LiveSlot* live_slots() const;
    [[nodiscard]] format::TimelineSample* timeline() const;
    [[nodiscard]] format::SpillSite* spill_sites() const;
    // Reserves the blocks of live slots [first, first + count) on disk, so that writing them cannot
    // fail with a SIGBUS. 0, or the error (ENOSPC: the disk has no room; ESTALE: the path names
    // another file now). Thread-safe.
    int reserve_live_slots(uint64_t first, uint64_t count);

    // Appends to the event ring; fills in `commit` itself. Lock-free.
    void append_event(format::EventRecord& event);
    // Appends at a sequence number claimed from sequence_counter() beforehand, by whoever must know it
    // before the event is written.
    void append_event(format::EventRecord& event, uint64_t sequence);
    [[nodiscard]] uint64_t* sequence_counter() const { return &header_->ring_head; }
    // Prepares the ring's pages a few MiB ahead of the newest event, in one call, so that the threads
    // that append do not take the page faults and traps of a first write to a page, for microseconds
    // each: makes them present until the ring has been written once, then writes to each without
    // changing it. For one thread at a time (the sampler's).
    void prepare_ring_ahead();
    // Appends to the array of events kept whatever happens to the ring; false when it is full.
    bool append_notable(format::EventRecord& event);

    enum class Stream { Modules, Strings, Stacks, Code };
    // Appends one record of `bytes` (a multiple of 8, prefix included) to an append-only stream:
    // `fill` writes everything after the prefix; the commit word is stored last. Callers serialise
    // appends to the same stream. Returns the record's offset in the region, or -1 when it is full.
    template <typename Fill> int64_t append_record(Stream stream, uint32_t bytes, Fill&& fill) {
        uint8_t* record = reserve(stream, bytes);
        if (record == nullptr)
            return -1;
        fill(record + sizeof(format::RecordPrefix));
        return commit(stream, record, bytes);
    }
    [[nodiscard]] const uint8_t* stream_data(Stream stream, uint64_t offset) const;

    // Adds a string record and returns its id (0 when the region is full). Thread-safe.
    uint32_t add_string(const char* text, size_t length);

    // Records how the process ended; `sender` with EndState::Signaled. Async-signal-safe.
    void write_end(format::EndState state, int code_or_signal, const format::EndSender& sender = {});
    // Withdraws the end record: an exec that failed leaves the process running.
    void clear_end();
    // Records what multiprocessing started the process to run (format::ProcessTarget); strings longer
    // than the header keeps are cut. Once, from one thread.
    void write_target(std::string_view filename, std::string_view qualname, int32_t first_line,
                      int64_t dataloader_worker_id);

  private:
    int reserve_range(uint64_t offset, uint64_t bytes, uint64_t length);
    uint8_t* reserve(Stream stream, uint32_t bytes);
    int64_t commit(Stream stream, uint8_t* record, uint32_t bytes);
    void write_header(const Config& config, const ProcessIdentity& identity, const Layout& layout,
                      bool host_only, const char* host);
    void populate_ring(uint64_t head, uint64_t lead);
    // The trace's directory, opened again: -1 where it is no longer the one the trace was made in or no
    // longer trusted.
    [[nodiscard]] int reopen_directory() const;
    void touch_ring(uint64_t head, uint64_t lead);

    uint8_t* base_ = nullptr;
    format::FileHeader* header_ = nullptr;
    // The file's identity: the live slots' blocks are reserved through the path, opened again each time,
    // so no descriptor of ours stays open in the program, and only in this file.
    uint64_t file_device_ = 0;
    uint64_t file_inode_ = 0;
    // The directory's, checked at the start: the file is removed and made again for an exec relative to
    // that directory, opened again by its name, and only where it is still that one and still trusted
    // (a directory above it may be another user's, who could put one of theirs in its place).
    uint64_t directory_device_ = 0;
    uint64_t directory_inode_ = 0;
    uint64_t mapped_bytes_ = 0;
    uint64_t reserved_bytes_ = 0;
    uint64_t host_only_bytes_ = 0;
    bool removed_for_exec_ = false;
    uint64_t ring_mask_ = 0;
    uint64_t ring_prepared_ = 0;        // bytes from the ring's start that prepare_ring_ahead made present
    uint64_t ring_touched_ = 0;         // events up to which touch_ring wrote to the pages
    uint64_t head_at_last_prepare_ = 0; // the ring's head at prepare_ring_ahead's last call
    uint32_t next_string_id_ = 1;
    SpinLock strings_lock_;
    char path_[1100] = {};
};

uint32_t current_thread_id();
// The calling thread's id where current_thread_id has cached it, else 0; caches nothing (a vfork child
// runs on its parent's thread, whose cache it must leave alone).
uint32_t cached_thread_id();
void forget_thread_id_after_fork();

} // namespace gpuleak
