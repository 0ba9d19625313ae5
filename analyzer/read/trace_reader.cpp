#include "read/trace_reader.h"

#include <algorithm>
#include <cstring>
#include <fmt/format.h>
#include <memory>

#include "read/event_record.h"
#include "read/mapped_file.h"
#include "read/trace_set.h"

namespace gpuleak::analyzer {

namespace {

using format::FileHeader;
using format::Region;

// Every read of the trace goes through here: a record is copied out once and then validated in the
// copy, so no field can change between its check and its use, even while a live process writes the
// file, and no read depends on the alignment of the bytes.
template <class T> bool copy_out(std::span<const std::byte> bytes, uint64_t offset, T& out) {
    if (offset > bytes.size() || bytes.size() - offset < sizeof(T))
        return false;
    std::memcpy(&out, bytes.data() + offset, sizeof(T));
    return true;
}

constexpr uint64_t align8(uint64_t bytes) {
    return (bytes + 7) & ~uint64_t{7};
}

std::string bounded_string(const char* chars, std::size_t capacity) {
    return {chars, strnlen(chars, capacity)};
}

// Like /proc/PID/cmdline: a NUL ends each argument, and the last one may lack it (truncation).
std::vector<std::string> split_command_line(const char* chars, std::size_t bytes) {
    std::vector<std::string> arguments;
    std::size_t start = 0;
    for (std::size_t i = 0; i < bytes; ++i) {
        if (chars[i] == '\0') {
            arguments.emplace_back(chars + start, i - start);
            start = i + 1;
        }
    }
    if (start < bytes)
        arguments.emplace_back(chars + start, bytes - start);
    return arguments;
}

struct RegionSpec {
    const char* name;
    Region region;
    uint64_t capacity;     // records the header says the region holds; streams have none
    uint64_t record_bytes; // 0 for streams
    uint64_t prefix_bytes; // before the records, when there are any: the live table's stripe marks
};

} // namespace

class TraceReader::Decoder {
  public:
    // `file`: where `bytes` are mapped from, or null for bytes that belong to the caller.
    Decoder(TraceReader& trace, std::span<const std::byte> bytes, const std::string& name,
            std::shared_ptr<const MappedFile> file)
        : trace_(trace), bytes_(bytes), name_(name), file_(std::move(file)) {}

    void run() {
        check_identity();
        leave_out_absent_regions();
        decode_header();
        check_regions();
        decode_modules();
        decode_strings();
        decode_stacks();
        decode_code();
        decode_live();
        decode_spill();
        decode_ring();
        decode_notable();
        decode_timeline();
    }

  private:
    [[noreturn]] void fail(const std::string& problem) const { throw TraceError(name_, problem); }
    void warn(std::string line) { trace_.decoded_warnings_.push_back(std::move(line)); }

    [[noreturn]] void fail_truncated_header() const {
        uint64_t file_bytes = 0;
        if (copy_out(bytes_, offsetof(FileHeader, file_bytes), file_bytes))
            fail(fmt::format("truncated: header says {} bytes, file has {}", file_bytes, bytes_.size()));
        fail(fmt::format("truncated: file has {} bytes, less than a header", bytes_.size()));
    }

    // Establishes that the bytes are a complete header of this version; everything after relies on raw_.
    void check_identity() {
        if (bytes_.empty())
            fail("empty file");
        if (bytes_.size() < sizeof(format::kMagic) ||
            std::memcmp(bytes_.data(), format::kMagic, sizeof(format::kMagic)) != 0)
            fail("not a gpuleak trace (bad magic)");
        uint32_t endian_tag = 0;
        uint32_t version = 0;
        if (!copy_out(bytes_, offsetof(FileHeader, endian_tag), endian_tag) ||
            !copy_out(bytes_, offsetof(FileHeader, format_version), version))
            fail_truncated_header();
        if (endian_tag == __builtin_bswap32(format::kEndianTag))
            fail("written with the other byte order");
        if (endian_tag != format::kEndianTag)
            fail(fmt::format("not a gpuleak trace (bad endian tag {:#x})", endian_tag));
        if (version > format::kFormatVersion)
            fail(fmt::format("format version {} is newer than this reader ({})", version,
                             format::kFormatVersion));
        if (!format::readable_format_version(version))
            fail(fmt::format("unsupported format version {}", version));
        uint32_t header_bytes = 0;
        if (!copy_out(bytes_, offsetof(FileHeader, header_bytes), header_bytes))
            fail_truncated_header();
        if (header_bytes != format::kHeaderBytes)
            fail(fmt::format("corrupt header: header size {}, expected {}", header_bytes,
                             format::kHeaderBytes));
        if (bytes_.size() < header_bytes || !copy_out(bytes_, 0, raw_))
            fail_truncated_header();
        if (raw_.file_bytes < header_bytes)
            fail(fmt::format("corrupt header: file size {} is smaller than the header", raw_.file_bytes));
        if (raw_.file_bytes > bytes_.size()) {
            warn(fmt::format("truncated: header says {} bytes, file has {}; what is missing reads as empty",
                             raw_.file_bytes, bytes_.size()));
        } else {
            bytes_ = bytes_.first(raw_.file_bytes);
        }
    }

    // A host-only trace has only its timeline and notable array: the other regions lie past its end and
    // hold nothing yet.
    void leave_out_absent_regions() {
        if ((raw_.flags & static_cast<uint32_t>(format::HeaderFlag::HostOnly)) == 0)
            return;
        for (Region* region :
             {&raw_.modules, &raw_.strings, &raw_.stacks, &raw_.live, &raw_.ring, &raw_.code, &raw_.spill})
            *region = Region{};
        raw_.live_capacity = raw_.spill_capacity = raw_.ring_capacity = 0;
        raw_.ring_head = raw_.modules_used = raw_.strings_used = raw_.stacks_used = raw_.code_used = 0;
        raw_.spill_used = 0;
    }

    void decode_header() {
        TraceHeader& header = trace_.header_;
        header.rank = raw_.rank;
        header.local_rank = raw_.local_rank;
        header.world_size = raw_.world_size;
        header.host_memory_bytes = raw_.host_memory_bytes;
        if (raw_.format_version >= 19) {
            header.node_rank = raw_.node_rank;
            header.slurm_task = raw_.slurm_task;
            header.slurm_local_task = raw_.slurm_local_task;
            header.slurm_tasks = raw_.slurm_tasks;
            header.job = bounded_string(raw_.job, sizeof(raw_.job));
        }
        header.format_version = raw_.format_version;
        header.flags = raw_.flags;
        header.file_bytes = raw_.file_bytes;
        header.pid = raw_.pid;
        header.ppid = raw_.ppid;
        header.start_realtime_ns = raw_.start_realtime_ns;
        header.start_monotonic_ns = raw_.start_monotonic_ns;
        header.stack_depth = raw_.stack_depth;
        header.timeline_interval_ms_initial = raw_.timeline_interval_ms_initial;
        header.hostname = bounded_string(raw_.hostname, sizeof(raw_.hostname));
        header.parent_trace = bounded_string(raw_.parent_trace, sizeof(raw_.parent_trace));
        uint32_t command_line_bytes = raw_.command_line_bytes;
        if (command_line_bytes > sizeof(raw_.command_line)) {
            warn(fmt::format("command line length {} exceeds its field; read as {}", command_line_bytes,
                             sizeof(raw_.command_line)));
            command_line_bytes = sizeof(raw_.command_line);
        }
        header.command_line = split_command_line(raw_.command_line, command_line_bytes);
        header.live_capacity = raw_.live_capacity;
        header.spill_capacity = raw_.spill_capacity;
        header.ring_capacity = raw_.ring_capacity;
        header.notable_capacity = raw_.notable_capacity;
        header.timeline_capacity = raw_.timeline_capacity;
        header.counters = TraceCounters{
            .ring_head = raw_.ring_head,
            .notable_count = raw_.notable_count,
            .modules_used = raw_.modules_used,
            .strings_used = raw_.strings_used,
            .stacks_used = raw_.stacks_used,
            .live_untracked = raw_.live_untracked,
            .stacks_dropped = raw_.stacks_dropped,
            .strings_dropped = raw_.strings_dropped,
            .timeline_samples = raw_.timeline_samples,
            .timeline_interval_ns = raw_.timeline_interval_ns,
            .free_unknown = raw_.free_unknown,
            .code_used = raw_.code_used,
            .code_dropped = raw_.code_dropped,
            .reentry_dropped = raw_.reentry_dropped,
            .reentry_dropped_notes = raw_.reentry_dropped_notes,
        };
        decode_python_version();
        header.accounting = raw_.accounting;
        for (uint32_t device = 0; device < format::kMaxDevices; ++device) {
            const format::DeviceMemoryView& view = raw_.device_memory[device];
            // A view that contradicts itself (free above total) is corruption: left out, not trusted.
            if (view.total_bytes != 0 && view.lowest_free_bytes <= view.total_bytes &&
                view.last_free_bytes <= view.total_bytes)
                header.device_memory[device] = view;
        }
        decode_end();
        decode_target();
    }

    void decode_target() {
        const format::ProcessTarget& raw = raw_.target;
        if (raw.commit == 0)
            return;
        if (raw.commit != format::kTargetCommit || raw.filename_bytes >= sizeof raw.filename ||
            raw.qualname_bytes >= sizeof raw.qualname) {
            warn(fmt::format("the process's target record is corrupt (commit word {:#x}); left out",
                             raw.commit));
            return;
        }
        ProcessTarget& target = trace_.header_.target.emplace();
        target.filename.assign(raw.filename, raw.filename_bytes);
        target.qualname.assign(raw.qualname, raw.qualname_bytes);
        target.first_line = raw.first_line;
        if (raw.dataloader_worker_id >= 0 && raw.dataloader_worker_id <= INT32_MAX)
            target.dataloader_worker_id = static_cast<int>(raw.dataloader_worker_id);
    }

    void decode_python_version() {
        // Only (major << 8) | minor fits: anything wider is corruption, and a line table read in the
        // wrong format would give wrong lines rather than none.
        if (raw_.python_version > UINT16_MAX) {
            warn(fmt::format("Python version {:#x} is not a version; Python frames have no lines",
                             raw_.python_version));
            return;
        }
        trace_.header_.python_version = static_cast<uint16_t>(raw_.python_version);
    }

    void decode_end() {
        ProcessEnd& end = trace_.header_.end;
        if (raw_.end_commit == 0)
            return;
        if (raw_.end_commit != format::kEndCommit) {
            warn(fmt::format("end record is corrupt (commit word {:#x}); read as running", raw_.end_commit));
            return;
        }
        const auto state = static_cast<format::EndState>(raw_.end_state);
        if (state != format::EndState::Exited && state != format::EndState::Signaled &&
            state != format::EndState::Exec && state != format::EndState::Detached) {
            warn(fmt::format("end record has unknown state {}; read as running", raw_.end_state));
            return;
        }
        end.state = state;
        end.exit_code = raw_.exit_code;
        end.signal = raw_.end_signal;
        end.monotonic_ns = raw_.end_monotonic_ns;
        if (state == format::EndState::Signaled)
            decode_sender(end.sender);
    }

    void decode_sender(SignalSender& sender) {
        const format::EndSender& raw = raw_.end_sender;
        if (raw.kind > static_cast<uint32_t>(format::SenderKind::Notebook)) {
            warn(fmt::format("the signal's sender has unknown kind {}; read as unknown", raw.kind));
            return;
        }
        sender.kind = static_cast<format::SenderKind>(raw.kind);
        sender.signal_code = raw.signal_code;
        sender.pid = raw.pid;
        sender.uid = raw.uid;
        sender.name.assign(raw.name, strnlen(raw.name, sizeof raw.name));
        sender.written_by_launcher = raw.written_by == static_cast<uint32_t>(format::EndWriter::Launcher);
    }

    [[nodiscard]] std::vector<RegionSpec> region_specs() const {
        return {
            {"modules", raw_.modules, 0, 0, 0},
            {"strings", raw_.strings, 0, 0, 0},
            {"stacks", raw_.stacks, 0, 0, 0},
            {"live", raw_.live, raw_.live_capacity, sizeof(format::LiveSlot),
             sizeof(format::LiveStripeMarks)},
            {"ring", raw_.ring, raw_.ring_capacity, sizeof(format::EventRecord), 0},
            {"notable", raw_.notable, raw_.notable_capacity, sizeof(format::EventRecord), 0},
            {"timeline", raw_.timeline, raw_.timeline_capacity, sizeof(format::TimelineSample), 0},
            {"code", raw_.code, 0, 0, 0},
            {"spill", raw_.spill, raw_.spill_capacity, sizeof(format::SpillSite), 0},
        };
    }

    // After this, every region lies inside file_bytes and holds its capacity (after its prefix, if it
    // has records), so a slot index below the capacity is in bounds of the region (though perhaps
    // beyond the end of a truncated file).
    void check_regions() const {
        std::vector<RegionSpec> occupied;
        for (const RegionSpec& spec : region_specs()) {
            const Region& region = spec.region;
            if (region.offset % 64 != 0)
                fail(fmt::format("region '{}' is not 64-byte aligned", spec.name));
            const uint64_t room = spec.record_bytes == 0 || region.size < spec.prefix_bytes
                                      ? 0
                                      : (region.size - spec.prefix_bytes) / spec.record_bytes;
            if (spec.record_bytes != 0 && spec.capacity > room)
                fail(fmt::format("region '{}' has room for {} records, header says {}", spec.name, room,
                                 spec.capacity));
            if (region.size == 0)
                continue;
            if (region.offset < raw_.header_bytes)
                fail(fmt::format("region '{}' overlaps the header", spec.name));
            if (region.offset > raw_.file_bytes || raw_.file_bytes - region.offset < region.size)
                fail(fmt::format("region '{}' lies outside the file", spec.name));
            occupied.push_back(spec);
        }
        std::sort(occupied.begin(), occupied.end(),
                  [](const RegionSpec& a, const RegionSpec& b) { return a.region.offset < b.region.offset; });
        for (std::size_t i = 1; i < occupied.size(); ++i) {
            const Region& previous = occupied[i - 1].region;
            if (previous.offset + previous.size > occupied[i].region.offset)
                fail(fmt::format("regions '{}' and '{}' overlap", occupied[i - 1].name, occupied[i].name));
        }
    }

    // The part of a region present in the file: all of it unless the file was cut short.
    std::span<const std::byte> region_bytes(const char* name, const Region& region) {
        const uint64_t present = region.offset >= bytes_.size()
                                     ? 0
                                     : std::min<uint64_t>(region.size, bytes_.size() - region.offset);
        if (present < region.size)
            warn(fmt::format("truncated: region '{}' has {} of its {} bytes", name, present, region.size));
        if (present == 0)
            return {};
        return bytes_.subspan(region.offset, present);
    }

    // The first `used` bytes of a region, which the decoder reads next (MappedFile::prefetch).
    void prefetch(std::span<const std::byte> region, uint64_t used) const {
        if (file_ != nullptr)
            file_->prefetch(region.first(std::min<uint64_t>(used, region.size())));
    }

    // Walks an append-only stream. `decode` takes one complete record of the declared size and returns
    // nullptr once it has stored it, or why it is malformed.
    template <class Record, class Decode>
    void walk_stream(const char* name, const Region& region, uint64_t used, Decode decode) {
        const std::span<const std::byte> bytes = region_bytes(name, region);
        prefetch(bytes, used);
        uint64_t offset = 0;
        format::RecordPrefix prefix{};
        while (copy_out(bytes, offset, prefix) && prefix.commit == format::kRecordCommit) {
            const char* problem = nullptr;
            if (prefix.bytes % 8 != 0)
                problem = "size not a multiple of 8";
            else if (prefix.bytes < sizeof(Record))
                problem = "smaller than its record type";
            else if (prefix.bytes > bytes.size() - offset)
                problem = "runs past the end of its region";
            else
                problem = decode(bytes.subspan(offset, prefix.bytes));
            if (problem != nullptr) {
                warn(fmt::format("stream '{}': malformed record at offset {} ({}); the rest is ignored", name,
                                 offset, problem));
                break;
            }
            offset += prefix.bytes;
        }
        if (used > offset)
            warn(fmt::format("stream '{}': header says {} bytes written, the first {} are valid (torn tail)",
                             name, used, offset));
    }

    void decode_modules() {
        walk_stream<format::ModuleRecord>(
            "modules", raw_.modules, raw_.modules_used, [&](std::span<const std::byte> bytes) -> const char* {
                format::ModuleRecord record{};
                copy_out(bytes, 0, record);
                if (record.build_id_bytes > sizeof(record.build_id))
                    return "build id longer than its field";
                if (bytes.size() != align8(uint64_t{sizeof(record)} + record.path_bytes + 1))
                    return "size does not match its path length";
                const auto* path = reinterpret_cast<const char*>(bytes.data() + sizeof(record));
                if (path[record.path_bytes] != '\0')
                    return "path not terminated";
                trace_.modules_.push_back(Module{
                    .path = std::string(path, record.path_bytes),
                    .build_id =
                        std::vector<uint8_t>(record.build_id, record.build_id + record.build_id_bytes),
                    .load_address = record.load_address,
                    .low = record.low,
                    .high = record.high,
                });
                return nullptr;
            });
    }

    void decode_strings() {
        walk_stream<format::StringRecord>(
            "strings", raw_.strings, raw_.strings_used, [&](std::span<const std::byte> bytes) -> const char* {
                format::StringRecord record{};
                copy_out(bytes, 0, record);
                if (record.id == 0)
                    return "id 0";
                if (bytes.size() != align8(uint64_t{sizeof(record)} + record.bytes + 1))
                    return "size does not match its length";
                const auto* text = reinterpret_cast<const char*>(bytes.data() + sizeof(record));
                if (text[record.bytes] != '\0')
                    return "string not terminated";
                if (!trace_.strings_.try_emplace(record.id, text, record.bytes).second)
                    return "duplicate id";
                return nullptr;
            });
    }

    void decode_stacks() {
        walk_stream<format::StackRecord>(
            "stacks", raw_.stacks, raw_.stacks_used, [&](std::span<const std::byte> bytes) -> const char* {
                format::StackRecord record{};
                copy_out(bytes, 0, record);
                if (record.id == 0)
                    return "id 0";
                if (record.native_count > format::kMaxStackDepth ||
                    record.python_count > format::kMaxStackDepth)
                    return "more frames than any stack may have";
                const uint64_t native_bytes = uint64_t{record.native_count} * sizeof(uint64_t);
                if (bytes.size() != sizeof(record) + native_bytes +
                                        uint64_t{record.python_count} * sizeof(format::PythonFrameRecord))
                    return "size does not match its frame count";
                std::vector<uint64_t> frames(record.native_count);
                if (!frames.empty()) // an empty vector's data() may be null, which memcpy must not see
                    std::memcpy(frames.data(), bytes.data() + sizeof(record), native_bytes);
                if (!trace_.stacks_.try_emplace(record.id, std::move(frames)).second)
                    return "duplicate id";
                if (record.python_count == 0)
                    return nullptr;
                std::vector<PythonFrame>& python = trace_.python_stacks_[record.id];
                python.reserve(record.python_count);
                for (uint64_t i = 0; i < record.python_count; ++i) {
                    format::PythonFrameRecord frame{};
                    copy_out(bytes, sizeof(record) + native_bytes + i * sizeof(frame), frame);
                    python.push_back({frame.code_id, frame.offset_and_flags & format::kPythonOffsetMask,
                                      (frame.offset_and_flags & format::kPythonFrameLoopEntry) != 0});
                }
                return nullptr;
            });
    }

    // Code ids are not checked against the stacks that name them: a frame whose code object is missing
    // is shown as an unknown Python frame, and the code objects that did not fit are counted apart.
    void decode_code() {
        walk_stream<format::CodeRecord>(
            "code", raw_.code, raw_.code_used, [&](std::span<const std::byte> bytes) -> const char* {
                format::CodeRecord record{};
                copy_out(bytes, 0, record);
                if (record.id == 0)
                    return "id 0";
                if ((record.flags & ~static_cast<uint32_t>(format::CodeFlag::Truncated)) != 0)
                    return "unknown flags";
                const uint64_t filename_at = sizeof(record);
                const uint64_t qualname_at = filename_at + record.filename_bytes;
                const uint64_t line_table_at = qualname_at + record.qualname_bytes;
                if (bytes.size() != align8(line_table_at + record.line_table_bytes))
                    return "size does not match its lengths";
                const auto* chars = reinterpret_cast<const char*>(bytes.data());
                const auto* line_table = reinterpret_cast<const uint8_t*>(bytes.data() + line_table_at);
                CodeObject code{
                    .filename = std::string(chars + filename_at, record.filename_bytes),
                    .qualname = std::string(chars + qualname_at, record.qualname_bytes),
                    .first_line = record.first_line,
                    .address = record.address,
                    .line_table = std::vector<uint8_t>(line_table, line_table + record.line_table_bytes),
                    .truncated = (record.flags & static_cast<uint32_t>(format::CodeFlag::Truncated)) != 0,
                };
                if (!trace_.code_objects_.try_emplace(record.id, std::move(code)).second)
                    return "duplicate id";
                return nullptr;
            });
    }

    // The slots of stripe `stripe` that its mark says were ever used, as [first, end) slot indices. A
    // mark past the end of its stripe is corrupt: the whole stripe is read, which finds every live slot
    // the stripe holds, and the damage costs a warning, not the trace.
    std::pair<uint64_t, uint64_t> used_slots(const format::LiveStripeMarks& marks, uint32_t stripe) {
        const uint64_t first = format::live_stripe_start(raw_.live_capacity, stripe);
        const uint64_t slots = format::live_stripe_start(raw_.live_capacity, stripe + 1) - first;
        const uint64_t used = marks.used[stripe];
        if (used <= slots)
            return {first, first + used};
        warn(fmt::format("live table: stripe {} has {} slots, its mark says {} were used; all are read",
                         stripe, slots, used));
        return {first, first + slots};
    }

    void decode_live() {
        const std::span<const std::byte> bytes = region_bytes("live", raw_.live);
        LiveSet& live = trace_.live_;
        if (raw_.live_capacity == 0)
            return;
        // Marks cut off with a truncated file read as 0: the slots after them are missing too.
        format::LiveStripeMarks marks{};
        copy_out(bytes, 0, marks);
        const std::span<const std::byte> slot_bytes =
            bytes.size() > sizeof(marks) ? bytes.subspan(sizeof(marks)) : std::span<const std::byte>{};
        // The table's size follows GPULEAK_MAX_MB, not the live set: only the slots below the stripes'
        // marks have ever been used, and most of those are free slots that the state word alone rules
        // out. Pages already scanned are released as the scan goes. Only the slots present in the file:
        // a corrupt capacity must not make the scan spin.
        const uint64_t present =
            std::min<uint64_t>(raw_.live_capacity, slot_bytes.size() / sizeof(format::LiveSlot));
        constexpr uint64_t kChunkSlots = 1 << 16;
        for (uint32_t stripe = 0; stripe < format::kLiveStripes; ++stripe) {
            auto [first, end] = used_slots(marks, stripe);
            end = std::min(end, present);
            for (uint64_t chunk = first; chunk < end; chunk += kChunkSlots) {
                const uint64_t chunk_end = std::min(end, chunk + kChunkSlots);
                for (uint64_t slot = chunk; slot < chunk_end; ++slot)
                    decode_live_slot(slot_bytes, slot * sizeof(format::LiveSlot), live);
                release(slot_bytes, chunk * sizeof(format::LiveSlot), chunk_end * sizeof(format::LiveSlot));
            }
        }
        if (live.invalid_slots != 0)
            warn(fmt::format("live table: {} slots in flight or malformed, ignored", live.invalid_slots));
    }

    void decode_live_slot(std::span<const std::byte> slot_bytes, uint64_t offset, LiveSet& live) {
        uint32_t state = 0;
        format::LiveSlot record{};
        if (!copy_out(slot_bytes, offset, state) || state == format::kSlotFree ||
            !copy_out(slot_bytes, offset, record) || record.state == format::kSlotFree)
            return;
        if (record.state != format::kSlotLive || record.kind == 0 || !valid_kind(record.kind) ||
            !valid_device(record.device)) {
            ++live.invalid_slots;
            return;
        }
        live.allocations.push_back(LiveAllocation{
            .address = record.address,
            .size = record.size,
            .time_ns = record.time_ns,
            .stream = record.stream,
            .stack_id = record.stack_id,
            .thread_id = record.thread_id,
            .device = record.device,
            .kind = static_cast<format::MemoryKind>(record.kind),
            .api = record.api,
            .sequence = record.sequence,
        });
    }

    // The sites of the allocations that had no live slot, with how many of them are live and their
    // bytes; record 0 holds those whose site found no record.
    void decode_spill() {
        const std::span<const std::byte> bytes = region_bytes("spill", raw_.spill);
        const uint64_t records = std::min<uint64_t>(
            {raw_.spill_used, raw_.spill_capacity, bytes.size() / sizeof(format::SpillSite)});
        prefetch(bytes, records * sizeof(format::SpillSite));
        uint64_t malformed = 0;
        for (uint64_t i = 0; i < records; ++i) {
            format::SpillSite record{};
            copy_out(bytes, i * sizeof(record), record);
            const bool unattributed = i == 0;
            if (record.commit != format::kRecordCommit ||
                (unattributed ? record.kind != 0 : record.kind == 0 || !valid_kind(record.kind)) ||
                !valid_device(record.device)) {
                ++malformed;
                continue;
            }
            const format::SpillTally& tally = record.tally[record.version % 2];
            if (tally.count == 0)
                continue;
            SpilledSite site{
                .stack_id = record.stack_id,
                .device = record.device,
                .kind = static_cast<format::MemoryKind>(record.kind),
                .count = tally.count,
                .bytes = tally.bytes,
                .stretches = {},
            };
            // A shift of 60 or more would take the buckets past any event number: corrupt, and left out.
            for (uint64_t bucket = 0; bucket < format::kSpillBuckets && record.bucket_shift < 60; ++bucket) {
                const format::SpillBucket& stretch = record.buckets[bucket];
                if (stretch.count != 0)
                    site.stretches.push_back({bucket << record.bucket_shift,
                                              (bucket + 1) << record.bucket_shift, stretch.count,
                                              stretch.first_time_ns, stretch.last_time_ns});
            }
            trace_.live_.spilled.push_back(std::move(site));
        }
        if (raw_.spill_used > raw_.spill_capacity)
            warn(fmt::format("spill region: header says {} records are used, it has room for {}",
                             raw_.spill_used, raw_.spill_capacity));
        if (malformed != 0)
            warn(fmt::format("spill region: {} records in flight or malformed, ignored", malformed));
    }

    // Releases the pages of bytes [from, to) of a mapped region, with the one they share with what
    // precedes (64 KiB covers a page on every system Linux runs on).
    void release(std::span<const std::byte> region, uint64_t from, uint64_t to) const {
        constexpr uint64_t kLargestPage = 65536;
        to = std::min<uint64_t>(to, region.size());
        from = from > kLargestPage ? from - kLargestPage : 0;
        if (file_ != nullptr && from < to)
            file_->release(region.subspan(from, to - from));
    }

    // The ring is read in place, where the analysis visits it. Its torn count takes a pass over it, so
    // its warning is added to the decoder's when that pass is made.
    void decode_ring() {
        std::span<const std::byte> bytes = region_bytes("ring", raw_.ring);
        prefetch(bytes, std::min(raw_.ring_head, raw_.ring_capacity) * sizeof(format::EventRecord));
        std::shared_ptr<const void> owner = file_;
        if (file_ == nullptr) {
            // parse()'s bytes belong to the caller, who may free them once it returns: the ring gets a copy.
            auto copy = std::make_shared<const std::vector<std::byte>>(bytes.begin(), bytes.end());
            bytes = *copy;
            owner = std::move(copy);
        }
        trace_.ring_ = EventRing(bytes, raw_.ring_head, raw_.ring_capacity, std::move(owner), file_.get());
        trace_.ring_warning_at_ = trace_.decoded_warnings_.size();
    }

    void decode_notable() {
        const std::span<const std::byte> bytes = region_bytes("notable", raw_.notable);
        const uint64_t present = bytes.size() / sizeof(format::EventRecord);
        EventLog& log = trace_.notable_;
        const uint64_t kept = std::min(raw_.notable_count, raw_.notable_capacity);
        log.dropped = raw_.notable_count - kept;
        prefetch(bytes, kept * sizeof(format::EventRecord));
        if (log.dropped != 0)
            warn(fmt::format(
                "notable events: the array was full: the last {} were not kept (failures, markers, "
                "forks, notebook cells); a larger GPULEAK_MAX_MB keeps more",
                log.dropped));
        for (uint64_t index = 0; index < std::min(kept, present); ++index) {
            format::EventRecord record{};
            copy_out(bytes, index * sizeof(record), record);
            if (record.commit != 0 && valid_event(record))
                log.events.push_back(decode_event(record, record.commit - 1));
        }
        log.torn = kept - log.events.size();
        if (log.torn != 0)
            warn(fmt::format("notable events: {} of {} torn or malformed, ignored", log.torn, kept));
    }

    void decode_timeline() {
        const std::span<const std::byte> bytes = region_bytes("timeline", raw_.timeline);
        prefetch(bytes, raw_.timeline_capacity * sizeof(format::TimelineSample));
        std::vector<TimelineSample>& timeline = trace_.timeline_;
        for (uint64_t slot = 0; slot < raw_.timeline_capacity; ++slot) {
            format::TimelineSample record{};
            if (!copy_out(bytes, slot * sizeof(record), record))
                break;
            if (record.commit == 0)
                continue;
            TimelineSample sample{.sample = record.commit - 1,
                                  .time_ns = record.time_ns,
                                  .rss_bytes = record.rss_bytes,
                                  .events = record.events,
                                  .host = record.host,
                                  .python_modules = record.python_modules};
            std::copy(std::begin(record.kind_bytes), std::end(record.kind_bytes), sample.kind_bytes.begin());
            std::copy(std::begin(record.device_bytes), std::end(record.device_bytes),
                      sample.device_bytes.begin());
            std::copy(std::begin(record.device_block_bytes), std::end(record.device_block_bytes),
                      sample.device_block_bytes.begin());
            for (uint32_t device = 0; device < format::kMaxDevices; ++device)
                if (record.driver_said_ns[device] != 0)
                    sample.driver_said[device] = {record.driver_used_bytes[device],
                                                  record.driver_said_ns[device]};
            timeline.push_back(sample);
        }
        // Thinning moves samples within the array, so one sample may briefly sit in two slots.
        std::sort(timeline.begin(), timeline.end(),
                  [](const TimelineSample& a, const TimelineSample& b) { return a.sample < b.sample; });
        timeline.erase(std::unique(timeline.begin(), timeline.end(),
                                   [](const TimelineSample& a, const TimelineSample& b) {
                                       return a.sample == b.sample;
                                   }),
                       timeline.end());
        std::stable_sort(
            timeline.begin(), timeline.end(),
            [](const TimelineSample& a, const TimelineSample& b) { return a.time_ns < b.time_ns; });
    }

    TraceReader& trace_;
    std::span<const std::byte> bytes_;
    const std::string& name_;
    std::shared_ptr<const MappedFile> file_;
    FileHeader raw_{};
};

TraceReader TraceReader::parse(std::span<const std::byte> bytes, const std::string& name) {
    TraceReader trace;
    Decoder(trace, bytes, name, nullptr).run();
    return trace;
}

TraceReader TraceReader::open(const std::string& path) {
    auto file = std::make_shared<const MappedFile>(path);
    // Asked before the end record is read: a process that ends meanwhile has written its end by then.
    const std::optional<bool> running = trace_writer_running(path);
    TraceReader trace;
    Decoder(trace, file->bytes(), path, file).run();
    trace.file_ = std::move(file);
    if (trace.header_.end.state == format::EndState::Running)
        trace.header_.end.running_when_opened = running;
    return trace;
}

const EventLog& TraceReader::events() const {
    if (!events_) {
        EventLog log;
        log.dropped = ring_.dropped();
        // Reserved at what a visit can see, whatever the counters say: growing by doubling would copy
        // the events again and again and, at the last doubling, hold up to twice their memory.
        log.events.reserve(ring_.present());
        visit_events_newest_first([&](const Event& event) {
            log.events.push_back(event);
            return true;
        });
        std::reverse(log.events.begin(), log.events.end());
        log.torn = ring_.window() - log.events.size();
        events_ = std::move(log);
    }
    return *events_;
}

std::optional<Event> TraceReader::newest_event() const {
    std::optional<Event> newest;
    ring_.visit_newest_first([&](const Event& event) {
        newest = event;
        return false;
    });
    return newest;
}

void TraceReader::note_ring_visited(uint64_t valid) const {
    if (!ring_valid_)
        ring_valid_ = valid;
}

const std::vector<std::string>& TraceReader::warnings() const {
    if (!warnings_) {
        if (!ring_valid_)
            visit_events_newest_first([](const Event&) { return true; });
        std::vector<std::string> warnings = decoded_warnings_;
        const uint64_t torn = ring_.window() - *ring_valid_;
        if (torn != 0)
            warnings.insert(warnings.begin() + static_cast<std::ptrdiff_t>(ring_warning_at_),
                            fmt::format("ring: {} of the last {} events torn or malformed, ignored", torn,
                                        ring_.window()));
        warnings_ = std::move(warnings);
    }
    return *warnings_;
}

} // namespace gpuleak::analyzer
