#include "recording/trace_writer.h"

#include "common/directory_trust.h"
#include "common/file_bytes.h"
#include "common/file_descriptor.h"
#include "common/warning.h"
#include "recording/monotonic_clock.h"

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace gpuleak {

using format::EventRecord;
using format::FileHeader;
using format::Region;

namespace {

constexpr uint64_t kAlign = 64;
// A host-only trace (a DataLoader worker's) is mostly its timeline: 2048 samples keep it below 3 MiB.
constexpr uint64_t kTimelineCapacity = 2048;
constexpr int kMaxNameAttempts = 100;

// Gives a trace its name: the first of `base`, `base.1`, ... that `take` gets (its errno EEXIST while
// a name is taken). False when none is free or `take` fails otherwise, errno saying why.
template <class Take> bool take_free_name(const char* base, char* path, size_t capacity, Take&& take) {
    for (int attempt = 0; attempt < kMaxNameAttempts; ++attempt) {
        const int written = attempt == 0 ? std::snprintf(path, capacity, "%s", base)
                                         : std::snprintf(path, capacity, "%s.%d", base, attempt);
        if (written < 0 || static_cast<size_t>(written) >= capacity) {
            errno = ENAMETOOLONG;
            return false;
        }
        if (take(path))
            return true;
        if (errno != EEXIST)
            return false;
    }
    return false;
}

// A file with no name yet in the directory it is to be made in, which only linking it there makes
// visible: a process killed while its trace is being set up (a pool's worker terminated at once) leaves
// no half-made file. -1 where the file system has no O_TMPFILE, or where /proc, through which it is
// linked, is not mounted.
int open_unnamed_in(int directory_fd) {
    if (::access("/proc/self/fd", X_OK) != 0)
        return -1;
    return ::openat(directory_fd, ".", O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
}

// GPULEAK_MAX_MB, or less where the trace's file system has not that much free: half of what is free, so
// that its children's traces and the program's own files find room too. Said once a run: a forked child
// inherits its parent's words on it.
uint64_t size_that_fits(const Config& config, int directory_fd, const char* directory, bool forked) {
    const uint64_t max_bytes = config.max_bytes;
    struct statvfs file_system {};
    if (::fstatvfs(directory_fd, &file_system) != 0)
        return max_bytes;
    const uint64_t free_bytes = static_cast<uint64_t>(file_system.f_bavail) * file_system.f_frsize;
    const uint64_t fits = std::max<uint64_t>((free_bytes / 2) & ~((uint64_t{1} << 20) - 1), kMinMaxMb << 20);
    if (max_bytes <= fits)
        return max_bytes;
    if (forked)
        return fits;
    const auto mib = [](uint64_t bytes) { return static_cast<unsigned long long>(bytes >> 20); };
    if (config.max_bytes_chosen)
        warn("GPULEAK_MAX_MB=%llu is more than half of the %llu MiB free where the trace goes (%s): this "
             "trace is made of at most %llu MiB",
             mib(max_bytes), mib(free_bytes), directory, mib(fits));
    else
        warn("only %llu MiB are free where the trace goes (%s): this trace is made of at most %llu MiB, not "
             "the %llu of GPULEAK_MAX_MB's default",
             mib(free_bytes), directory, mib(fits), mib(max_bytes));
    return fits;
}

uint64_t align_up(uint64_t value) {
    return (value + kAlign - 1) & ~(kAlign - 1);
}

uint64_t floor_power_of_two(uint64_t value) {
    uint64_t result = 1;
    while (result * 2 <= value)
        result *= 2;
    return result;
}

__attribute__((tls_model("initial-exec"))) thread_local uint32_t t_thread_id = 0;

} // namespace

uint32_t current_thread_id() {
    if (t_thread_id == 0)
        t_thread_id = static_cast<uint32_t>(::syscall(SYS_gettid));
    return t_thread_id;
}

uint32_t cached_thread_id() {
    return t_thread_id;
}

void forget_thread_id_after_fork() {
    t_thread_id = 0;
}

Layout compute_layout(uint64_t max_bytes) {
    Layout layout{};
    uint64_t cursor = format::kHeaderBytes;
    auto place = [&](Region& region, uint64_t bytes) {
        region.offset = cursor;
        region.size = align_up(bytes);
        cursor += region.size;
    };
    // Shares of the file in thousandths, with a floor for small files.
    auto share = [&](uint64_t per_mille, uint64_t minimum) {
        uint64_t bytes = max_bytes / 1000 * per_mille;
        return bytes < minimum ? minimum : bytes;
    };
    // The timeline and the notable array first: a host-only trace is the file up to their end.
    layout.timeline_capacity = kTimelineCapacity;
    place(layout.timeline, kTimelineCapacity * sizeof(format::TimelineSample));
    // Failures, markers, forks and source names: a notebook adds three per cell run (two markers and its
    // source), so a default trace keeps some 7,000 cells.
    layout.notable_capacity = share(5, 256 << 10) / sizeof(EventRecord);
    place(layout.notable, layout.notable_capacity * sizeof(EventRecord));
    layout.host_only_bytes = cursor;
    place(layout.modules, share(5, 64 << 10));
    place(layout.strings, share(15, 64 << 10));
    place(layout.stacks, share(70, 256 << 10));
    place(layout.code, share(15, 256 << 10));
    // A site spills when its stripes of the live table are full: a few thousand sites at most do.
    layout.spill_capacity = share(10, 128 << 10) / sizeof(format::SpillSite);
    place(layout.spill, layout.spill_capacity * sizeof(format::SpillSite));
    uint64_t ring_records = floor_power_of_two(max_bytes / 8 / sizeof(EventRecord));
    if (ring_records < 1024)
        ring_records = 1024;
    layout.ring_capacity = ring_records;
    place(layout.ring, ring_records * sizeof(EventRecord));
    // The live table last, with what is left: the file's length covers it, but only the slots in use
    // take blocks on disk. Its slot indices are 32-bit (live_table.h).
    const uint64_t left = max_bytes > cursor + sizeof(format::LiveStripeMarks)
                              ? max_bytes - cursor - sizeof(format::LiveStripeMarks)
                              : 0;
    layout.live_capacity =
        std::min<uint64_t>(std::max<uint64_t>(left, 256 << 10) / sizeof(format::LiveSlot), UINT32_MAX / 4);
    layout.reserved_bytes = cursor + sizeof(format::LiveStripeMarks);
    place(layout.live, sizeof(format::LiveStripeMarks) + layout.live_capacity * sizeof(format::LiveSlot));
    layout.file_bytes = cursor;
    return layout;
}

bool TraceWriter::create(const Config& config, const ProcessIdentity& identity, bool host_only) {
    char base_path[sizeof path_ - 8];
    char host[sizeof FileHeader::hostname] = {};
    ::gethostname(host, sizeof host - 1);
    if (!expand_output_pattern(config.output_pattern, {identity.pid, rank_from_environment(), host},
                               base_path, sizeof base_path)) {
        warn("GPULEAK_OUTPUT expands to a path that is too long; not recording");
        return false;
    }
    char directory[PATH_MAX];
    const int directory_fd = open_directory_of(base_path, directory, sizeof directory);
    if (directory_fd < 0) {
        warn("cannot create trace file %s: %s; the program runs on unrecorded", base_path,
             std::strerror(errno));
        return false;
    }
    const FileDescriptor held_directory(directory_fd);
    struct stat identity_of_directory {};
    const char* distrust = ::fstat(directory_fd, &identity_of_directory) != 0
                               ? std::strerror(errno)
                               : directory_distrust(directory_fd);
    if (distrust != nullptr) {
        warn("the trace directory %s is %s: others could read, replace or remove a trace there; the program "
             "runs on unrecorded (set GPULEAK_OUTPUT to a directory of your own)",
             directory, distrust);
        return false;
    }
    int fd = open_unnamed_in(directory_fd);
    const bool named = fd < 0;
    if (named && !take_free_name(base_path, path_, sizeof path_, [&](const char* path) {
            fd = ::openat(directory_fd, name_in_directory(path),
                          O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
            return fd >= 0;
        })) {
        warn("cannot create trace file %s: %s; the program runs on unrecorded", path_, std::strerror(errno));
        return false;
    }
    const Layout layout =
        compute_layout(size_that_fits(config, directory_fd, directory, identity.parent_trace[0] != '\0'));
    // Reserving the blocks now turns "disk full" into a clean failure here instead of a SIGBUS in the
    // program the first time a page of the mapping is touched; the live slots' are reserved as they
    // are used (reserve_live_slots).
    const uint64_t reserved = host_only ? layout.host_only_bytes : layout.reserved_bytes;
    int reserve_error = ::posix_fallocate(fd, 0, static_cast<off_t>(reserved));
    if (reserve_error == 0 &&
        ::ftruncate(fd, static_cast<off_t>(host_only ? layout.host_only_bytes : layout.file_bytes)) != 0)
        reserve_error = errno;
    struct stat identity_of_file {};
    if (reserve_error == 0 && ::fstat(fd, &identity_of_file) != 0)
        reserve_error = errno;
    file_device_ = identity_of_file.st_dev;
    file_inode_ = identity_of_file.st_ino;
    directory_device_ = identity_of_directory.st_dev;
    directory_inode_ = identity_of_directory.st_ino;
    void* mapping = MAP_FAILED;
    // Mapped whole from the start, also past the end of a host-only file, which nothing touches until
    // promote() lengthens it.
    if (reserve_error == 0)
        mapping = ::mmap(nullptr, layout.file_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    int map_error = errno;
    if (reserve_error != 0 || mapping == MAP_FAILED) {
        warn("cannot reserve %llu bytes for trace file %s: %s; the program runs on unrecorded",
             static_cast<unsigned long long>(reserved), named ? path_ : base_path,
             std::strerror(reserve_error != 0 ? reserve_error : map_error));
        if (named)
            ::unlinkat(directory_fd, name_in_directory(path_), 0);
        ::close(fd);
        return false;
    }
    base_ = static_cast<uint8_t*>(mapping);
    header_ = reinterpret_cast<FileHeader*>(base_);
    ring_mask_ = layout.ring_capacity - 1;
    mapped_bytes_ = layout.file_bytes;
    reserved_bytes_ = layout.reserved_bytes;
    host_only_bytes_ = layout.host_only_bytes;
    removed_for_exec_ = false;
    next_string_id_ = 1;
    strings_lock_.reset_after_fork();
    write_header(config, identity, layout, host_only, host);
    char unnamed[32];
    std::snprintf(unnamed, sizeof unnamed, "/proc/self/fd/%d", fd);
    if (!named && !take_free_name(base_path, path_, sizeof path_, [&](const char* path) {
            return ::linkat(AT_FDCWD, unnamed, directory_fd, name_in_directory(path), AT_SYMLINK_FOLLOW) == 0;
        })) {
        warn("cannot create trace file %s: %s; the program runs on unrecorded", path_, std::strerror(errno));
        ::munmap(mapping, layout.file_bytes);
        ::close(fd);
        base_ = nullptr;
        header_ = nullptr;
        return false;
    }
    ::close(fd);
    // The name goes into children's headers and the stderr line: absolute, it still finds the file
    // from any other directory.
    char absolute[PATH_MAX];
    if (path_[0] != '/' && ::realpath(path_, absolute) != nullptr && std::strlen(absolute) < sizeof path_)
        std::memcpy(path_, absolute, std::strlen(absolute) + 1);
    return true;
}

bool TraceWriter::host_only() const {
    return header_ != nullptr && (__atomic_load_n(&header_->flags, __ATOMIC_RELAXED) &
                                  static_cast<uint32_t>(format::HeaderFlag::HostOnly)) != 0;
}

int TraceWriter::promote() {
    if (!host_only())
        return 0;
    const int error = reserve_range(host_only_bytes_, reserved_bytes_ - host_only_bytes_, mapped_bytes_);
    if (error != 0)
        return error;
    __atomic_store_n(&header_->file_bytes, mapped_bytes_, __ATOMIC_RELAXED);
    __atomic_fetch_and(&header_->flags, ~static_cast<uint32_t>(format::HeaderFlag::HostOnly),
                       __ATOMIC_RELEASE);
    return error;
}

int TraceWriter::reopen_directory() const {
    char directory[PATH_MAX];
    const int fd = open_directory_of(path_, directory, sizeof directory);
    struct stat now {};
    if (fd >= 0 && (::fstat(fd, &now) != 0 || now.st_dev != directory_device_ ||
                    now.st_ino != directory_inode_ || directory_distrust(fd) != nullptr)) {
        ::close(fd);
        return -1;
    }
    return fd;
}

void TraceWriter::remove_for_exec() {
    if (!host_only())
        return;
    const FileDescriptor directory(reopen_directory());
    struct stat now {};
    if (directory.get() >= 0 &&
        ::fstatat(directory.get(), name_in_directory(path_), &now, AT_SYMLINK_NOFOLLOW) == 0 &&
        now.st_dev == file_device_ && now.st_ino == file_inode_ &&
        ::unlinkat(directory.get(), name_in_directory(path_), 0) == 0)
        removed_for_exec_ = true;
}

bool TraceWriter::restore_after_failed_exec() {
    if (!removed_for_exec_)
        return true;
    removed_for_exec_ = false;
    const FileDescriptor directory(reopen_directory());
    const int fd = directory.get() < 0 ? -1
                                       : ::openat(directory.get(), name_in_directory(path_),
                                                  O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    bool ok = fd >= 0 && ::posix_fallocate(fd, 0, static_cast<off_t>(host_only_bytes_)) == 0;
    for (uint64_t written = 0; ok && written < host_only_bytes_;) {
        const ssize_t n = ::write(fd, base_ + written, host_only_bytes_ - written);
        if (n > 0)
            written += static_cast<uint64_t>(n);
        else if (n == 0 || errno != EINTR)
            ok = false;
    }
    struct stat identity_of_file {};
    ok = ok && ::fstat(fd, &identity_of_file) == 0;
    // The whole range, as create() maps it: promote() lengthens this file, and nothing of the range may
    // stay backed by the old one.
    const bool mapped = ok && ::mmap(base_, mapped_bytes_, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, fd,
                                     0) != MAP_FAILED;
    if (fd >= 0)
        ::close(fd);
    if (mapped) {
        file_device_ = identity_of_file.st_dev;
        file_inode_ = identity_of_file.st_ino;
        return true;
    }
    if (fd >= 0)
        ::unlinkat(directory.get(), name_in_directory(path_), 0);
    // After a failed MAP_FIXED the range may hold nothing: whatever it holds is not written again.
    base_ = nullptr;
    header_ = nullptr;
    return false;
}

void write_job_identity(FileHeader& header) {
    header.rank = environment_number("RANK");
    header.local_rank = environment_number("LOCAL_RANK");
    header.world_size = environment_number("WORLD_SIZE");
    header.node_rank = environment_number("GROUP_RANK");
    if (header.node_rank < 0)
        header.node_rank = environment_number("SLURM_NODEID");
    header.slurm_task = environment_number("SLURM_PROCID");
    header.slurm_local_task = environment_number("SLURM_LOCALID");
    header.slurm_tasks = environment_number("SLURM_NTASKS");
    const char* job = std::getenv("SLURM_JOB_ID");
    if (job == nullptr || *job == '\0') {
        job = std::getenv("TORCHELASTIC_RUN_ID");
        if (job != nullptr && std::strcmp(job, "none") == 0)
            job = nullptr;
    }
    std::snprintf(header.job, sizeof header.job, "%s", job != nullptr ? job : "");
}

void TraceWriter::write_header(const Config& config, const ProcessIdentity& identity, const Layout& layout,
                               bool host_only, const char* host) {
    FileHeader& h = *header_;
    if (host_only)
        h.flags |= static_cast<uint32_t>(format::HeaderFlag::HostOnly);
    if (config.attached)
        h.flags |= static_cast<uint32_t>(format::HeaderFlag::Attached);
    write_job_identity(h);
    h.host_memory_bytes = identity.host_memory_bytes;
    std::memcpy(h.magic, format::kMagic, sizeof h.magic);
    h.endian_tag = format::kEndianTag;
    h.header_bytes = format::kHeaderBytes;
    h.file_bytes = host_only ? layout.host_only_bytes : layout.file_bytes;
    h.pid = identity.pid;
    h.ppid = identity.ppid;
    timespec now{};
    clock_gettime(CLOCK_REALTIME, &now);
    h.start_realtime_ns =
        static_cast<uint64_t>(now.tv_sec) * 1000000000ull + static_cast<uint64_t>(now.tv_nsec);
    h.start_monotonic_ns = monotonic_ns();
    h.stack_depth = config.stack_depth;
    h.timeline_interval_ms_initial = config.sample_interval_ms;
    h.timeline_interval_ns = static_cast<uint64_t>(config.sample_interval_ms) * 1000000ull;
    // The name %h put in the file's name: the same machine, read once.
    std::snprintf(h.hostname, sizeof h.hostname, "%s", host);
    if (identity.parent_trace != nullptr)
        std::snprintf(h.parent_trace, sizeof h.parent_trace, "%s", identity.parent_trace);
    h.command_line_bytes =
        static_cast<uint32_t>(read_file_bytes("/proc/self/cmdline", h.command_line, sizeof h.command_line));
    h.modules = layout.modules;
    h.strings = layout.strings;
    h.stacks = layout.stacks;
    h.live = layout.live;
    h.ring = layout.ring;
    h.notable = layout.notable;
    h.timeline = layout.timeline;
    h.code = layout.code;
    h.spill = layout.spill;
    h.live_capacity = layout.live_capacity;
    h.spill_capacity = layout.spill_capacity;
    h.ring_capacity = layout.ring_capacity;
    h.notable_capacity = layout.notable_capacity;
    h.timeline_capacity = layout.timeline_capacity;
    // The version goes in last: a reader never takes a half-written header for a trace.
    __atomic_store_n(&h.format_version, format::kFormatVersion, __ATOMIC_RELEASE);
}

void TraceWriter::abandon_after_fork() {
    // The child's copy of the parent's mapping is private to the child's address space once unmapped;
    // the parent's file is untouched.
    if (base_ != nullptr)
        ::munmap(base_, mapped_bytes_);
    base_ = nullptr;
    header_ = nullptr;
    ring_prepared_ = 0;
    ring_touched_ = 0;
    head_at_last_prepare_ = 0;
    strings_lock_.reset_after_fork();
}

format::LiveStripeMarks* TraceWriter::live_marks() const {
    return reinterpret_cast<format::LiveStripeMarks*>(base_ + header_->live.offset);
}

format::LiveSlot* TraceWriter::live_slots() const {
    return reinterpret_cast<format::LiveSlot*>(base_ + header_->live.offset +
                                               sizeof(format::LiveStripeMarks));
}

format::SpillSite* TraceWriter::spill_sites() const {
    return reinterpret_cast<format::SpillSite*>(base_ + header_->spill.offset);
}

int TraceWriter::reserve_live_slots(uint64_t first, uint64_t count) {
    if (header_ == nullptr)
        return EBADF;
    return reserve_range(header_->live.offset + sizeof(format::LiveStripeMarks) +
                             first * sizeof(format::LiveSlot),
                         count * sizeof(format::LiveSlot), 0);
}

// Reserves [offset, offset + bytes) on disk and, when `length` is not 0, makes the file that long.
int TraceWriter::reserve_range(uint64_t offset, uint64_t bytes, uint64_t length) {
    const int fd = ::open(path_, O_RDWR | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return errno;
    struct stat now {};
    // The path may name another file now (the user moved ours away): reserve nothing in that one.
    int error = ::fstat(fd, &now) != 0 ? errno : 0;
    if (error == 0 && (now.st_dev != file_device_ || now.st_ino != file_inode_))
        error = ESTALE;
    if (error == 0) {
        do
            error = ::posix_fallocate(fd, static_cast<off_t>(offset), static_cast<off_t>(bytes));
        while (error == EINTR);
    }
    if (error == 0 && length != 0 && ::ftruncate(fd, static_cast<off_t>(length)) != 0)
        error = errno;
    ::close(fd);
    return error;
}

format::TimelineSample* TraceWriter::timeline() const {
    return reinterpret_cast<format::TimelineSample*>(base_ + header_->timeline.offset);
}

namespace {

// Publishes a fixed-size record: invalidate, fill, then store the commit word with release order, so
// that a reader after a crash sees either the old commit (stale, rejected by sequence) or the new one
// with every field in place.
void publish(EventRecord& slot, const EventRecord& event, uint64_t commit) {
    // A plain store and a fence, not a locked exchange: the slot is usually a cache line not yet in
    // the cache (the ring is larger than the cache), and a locked instruction on it stalls the thread
    // for the whole miss, where a store waits in the store buffer. The fence keeps the field stores
    // below from becoming visible before the invalidation; x86-64 keeps stores in program order, so
    // there only the compiler must not move them (and ThreadSanitizer supports no thread fence).
    __atomic_store_n(&slot.commit, 0, __ATOMIC_RELAXED);
#if defined(__x86_64__)
    __atomic_signal_fence(__ATOMIC_RELEASE);
#else
    __atomic_thread_fence(__ATOMIC_RELEASE);
#endif
    std::memcpy(reinterpret_cast<uint8_t*>(&slot) + sizeof slot.commit,
                reinterpret_cast<const uint8_t*>(&event) + sizeof event.commit,
                sizeof event - sizeof event.commit);
    __atomic_store_n(&slot.commit, commit, __ATOMIC_RELEASE);
}

} // namespace

void TraceWriter::append_event(EventRecord& event) {
    append_event(event, __atomic_fetch_add(&header_->ring_head, 1, __ATOMIC_RELAXED));
}

void TraceWriter::append_event(EventRecord& event, uint64_t sequence) {
    auto* ring = reinterpret_cast<EventRecord*>(base_ + header_->ring.offset);
    event.commit = sequence + 1;
    publish(ring[sequence & ring_mask_], event, sequence + 1);
    // The next event's slot, fetched now so that the next append does not wait for it.
    __builtin_prefetch(&ring[(sequence + 1) & ring_mask_], 1);
}

void TraceWriter::prepare_ring_ahead() {
    if (header_ == nullptr || host_only())
        return;
    // At least 65,536 events (a sampler interval's worth at 650,000 events a second, a page table's
    // worth of the process's memory), and twice what was appended since the last call, as the
    // sampler's interval grows when the timeline thins.
    constexpr uint64_t kAhead = 4 << 20;
    const uint64_t ring_bytes = header_->ring.size;
    const uint64_t head = __atomic_load_n(&header_->ring_head, __ATOMIC_RELAXED);
    const uint64_t lead =
        std::min(std::max(kAhead, 2 * (head - head_at_last_prepare_) * sizeof(EventRecord)), ring_bytes / 2);
    head_at_last_prepare_ = head;
    if (ring_prepared_ < ring_bytes)
        populate_ring(head, lead);
    else
        touch_ring(head, lead);
}

void TraceWriter::populate_ring(uint64_t head, uint64_t lead) {
    const uint64_t ring_bytes = header_->ring.size;
    const uint64_t written = std::min(head * sizeof(EventRecord), ring_bytes);
    const uint64_t target = std::min(written + lead, ring_bytes);
    // What the appending threads wrote already is present: start past it.
    const uint64_t from = std::max(ring_prepared_, written);
    if (target <= from)
        return;
    const auto page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
    uint8_t* const ring = base_ + header_->ring.offset;
    uint8_t* const start = ring + from - (reinterpret_cast<uintptr_t>(ring + from) & (page - 1));
    const auto length = static_cast<size_t>(ring + target - start);
    // Before Linux 5.14 (EINVAL) the appending threads fault the pages in, as they always did.
    if (::madvise(start, length, MADV_POPULATE_WRITE) != 0 && errno == EINVAL) {
        ring_prepared_ = ring_bytes;
        return;
    }
    ring_prepared_ = target;
}

void TraceWriter::touch_ring(uint64_t head, uint64_t lead) {
    // Once the ring has been written its pages stay present, but the first write to a page after the
    // kernel wrote it back to the file (which makes it read-only again), or after a hypervisor began
    // tracking the guest's dirty pages, still traps on the thread that writes (bench/README.md: a
    // fifth of what the recorder adds to a tensor's allocation and free on a VM). A write that changes
    // nothing, to one slot of each page ahead of the head, takes those traps here instead. An append that
    // reaches the slot meanwhile keeps its value: both are atomic accesses to the commit word.
    const uint64_t slots_per_page = static_cast<uint64_t>(::sysconf(_SC_PAGESIZE)) / sizeof(EventRecord);
    auto* ring = reinterpret_cast<EventRecord*>(base_ + header_->ring.offset);
    const uint64_t until = head + lead / sizeof(EventRecord);
    for (uint64_t slot = std::max(head, ring_touched_); slot < until; slot += slots_per_page)
        __atomic_fetch_add(&ring[slot & ring_mask_].commit, 0, __ATOMIC_RELAXED);
    ring_touched_ = std::max(ring_touched_, until);
}

bool TraceWriter::append_notable(EventRecord& event) {
    uint64_t index = __atomic_fetch_add(&header_->notable_count, 1, __ATOMIC_RELAXED);
    if (index >= header_->notable_capacity)
        return false;
    auto* notable = reinterpret_cast<EventRecord*>(base_ + header_->notable.offset);
    publish(notable[index], event, index + 1);
    return true;
}

namespace {

struct StreamPlace {
    Region region;
    uint64_t* used;
};

StreamPlace place_of(FileHeader& header, TraceWriter::Stream stream) {
    switch (stream) {
    case TraceWriter::Stream::Modules:
        return {header.modules, &header.modules_used};
    case TraceWriter::Stream::Strings:
        return {header.strings, &header.strings_used};
    case TraceWriter::Stream::Code:
        return {header.code, &header.code_used};
    case TraceWriter::Stream::Stacks:
        break;
    }
    return {header.stacks, &header.stacks_used};
}

} // namespace

uint8_t* TraceWriter::reserve(Stream stream, uint32_t bytes) {
    StreamPlace place = place_of(*header_, stream);
    uint64_t used = __atomic_load_n(place.used, __ATOMIC_RELAXED);
    if (bytes % 8 != 0 || used + bytes > place.region.size)
        return nullptr;
    return base_ + place.region.offset + used;
}

int64_t TraceWriter::commit(Stream stream, uint8_t* record, uint32_t bytes) {
    StreamPlace place = place_of(*header_, stream);
    auto* prefix = reinterpret_cast<format::RecordPrefix*>(record);
    prefix->bytes = bytes;
    __atomic_store_n(&prefix->commit, format::kRecordCommit, __ATOMIC_RELEASE);
    uint64_t offset = static_cast<uint64_t>(record - (base_ + place.region.offset));
    __atomic_store_n(place.used, offset + bytes, __ATOMIC_RELEASE);
    return static_cast<int64_t>(offset);
}

const uint8_t* TraceWriter::stream_data(Stream stream, uint64_t offset) const {
    return base_ + place_of(*header_, stream).region.offset + offset;
}

uint32_t TraceWriter::add_string(const char* text, size_t length) {
    SpinGuard guard(strings_lock_);
    uint32_t id = next_string_id_;
    uint64_t bytes = (sizeof(format::StringRecord) + length + 1 + 7) & ~uint64_t{7};
    if (bytes > UINT32_MAX)
        return 0;
    int64_t offset = append_record(Stream::Strings, static_cast<uint32_t>(bytes), [&](uint8_t* body) {
        auto* record = reinterpret_cast<format::StringRecord*>(body - sizeof(format::RecordPrefix));
        record->id = id;
        record->bytes = static_cast<uint32_t>(length);
        char* chars = reinterpret_cast<char*>(record + 1);
        std::memcpy(chars, text, length);
        chars[length] = '\0';
    });
    if (offset < 0) {
        __atomic_fetch_add(&header_->strings_dropped, 1, __ATOMIC_RELAXED);
        return 0;
    }
    ++next_string_id_;
    return id;
}

void TraceWriter::clear_end() {
    if (header_ != nullptr)
        __atomic_store_n(&header_->end_commit, 0, __ATOMIC_RELEASE);
}

void TraceWriter::write_end(format::EndState state, int code_or_signal, const format::EndSender& sender) {
    if (header_ == nullptr)
        return;
    FileHeader& h = *header_;
    __atomic_exchange_n(&h.end_commit, 0, __ATOMIC_ACQUIRE);
    h.end_state = static_cast<uint32_t>(state);
    if (state == format::EndState::Signaled) {
        h.end_signal = code_or_signal;
        h.end_sender = sender;
    } else {
        h.exit_code = code_or_signal;
    }
    h.end_monotonic_ns = monotonic_ns();
    __atomic_store_n(&h.end_commit, format::kEndCommit, __ATOMIC_RELEASE);
}

void TraceWriter::write_target(std::string_view filename, std::string_view qualname, int32_t first_line,
                               int64_t dataloader_worker_id) {
    if (header_ == nullptr)
        return;
    format::ProcessTarget& target = header_->target;
    const size_t filename_bytes = std::min(filename.size(), sizeof target.filename - 1);
    const size_t qualname_bytes = std::min(qualname.size(), sizeof target.qualname - 1);
    std::memcpy(target.filename, filename.data(), filename_bytes);
    target.filename[filename_bytes] = '\0';
    std::memcpy(target.qualname, qualname.data(), qualname_bytes);
    target.qualname[qualname_bytes] = '\0';
    target.filename_bytes = static_cast<uint32_t>(filename_bytes);
    target.qualname_bytes = static_cast<uint32_t>(qualname_bytes);
    target.first_line = first_line;
    target.dataloader_worker_id = dataloader_worker_id;
    __atomic_store_n(&target.commit, format::kTargetCommit, __ATOMIC_RELEASE);
}

} // namespace gpuleak
