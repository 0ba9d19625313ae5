#include "trace_reader.h"

#include <algorithm>
#include <cstring>
#include <fmt/format.h>

#include "mapped_file.h"

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

bool valid_kind(uint8_t kind) {
    return kind < format::kKindCount;
}

// Ordinals >= kMaxDevices are legal (accounted in the last slot); below -2 nothing is defined.
bool valid_device(int16_t device) {
    return device >= -2;
}

bool valid_event_type(uint16_t type) {
    return type >= static_cast<uint16_t>(format::EventType::Alloc) &&
           type <= static_cast<uint16_t>(format::EventType::Fork);
}

bool valid_event(const format::EventRecord& record) {
    return valid_event_type(record.type) && valid_kind(record.kind) && valid_device(record.device);
}

Event decode_event(const format::EventRecord& record, uint64_t sequence) {
    return Event{
        .sequence = sequence,
        .time_ns = record.time_ns,
        .address = record.address,
        .size = record.size,
        .stream = record.stream,
        .stack_id = record.stack_id,
        .thread_id = record.thread_id,
        .type = static_cast<format::EventType>(record.type),
        .kind = static_cast<format::MemoryKind>(record.kind),
        .api = record.api,
        .device = record.device,
        .result = record.result,
    };
}

struct RegionSpec {
    const char* name;
    Region region;
    uint64_t capacity;     // records the header says the region holds; streams have none
    uint64_t record_bytes; // 0 for streams
};

} // namespace

class TraceReader::Decoder {
  public:
    Decoder(TraceReader& trace, std::span<const std::byte> bytes, const std::string& name)
        : trace_(trace), bytes_(bytes), name_(name) {}

    void run() {
        check_identity();
        decode_header();
        check_regions();
        decode_modules();
        decode_strings();
        decode_stacks();
        decode_live();
        decode_ring();
        decode_notable();
        decode_timeline();
    }

  private:
    [[noreturn]] void fail(const std::string& problem) const { throw TraceError(name_, problem); }
    void warn(std::string line) { trace_.warnings_.push_back(std::move(line)); }

    [[noreturn]] void fail_truncated_header() const {
        uint64_t file_bytes = 0;
        if (copy_out(bytes_, offsetof(FileHeader, file_bytes), file_bytes))
            fail(fmt::format("truncated: header says {} bytes, file has {}", file_bytes, bytes_.size()));
        fail(fmt::format("truncated: file has {} bytes, less than a header", bytes_.size()));
    }

    // Establishes that the bytes are a complete version-1 header; everything after relies on raw_.
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
        if (version != format::kFormatVersion)
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

    void decode_header() {
        TraceHeader& header = trace_.header_;
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
        header.ring_capacity = raw_.ring_capacity;
        header.notable_capacity = raw_.notable_capacity;
        header.timeline_capacity = raw_.timeline_capacity;
        header.counters = TraceCounters{
            .ring_head = raw_.ring_head,
            .notable_count = raw_.notable_count,
            .modules_used = raw_.modules_used,
            .strings_used = raw_.strings_used,
            .stacks_used = raw_.stacks_used,
            .live_overflow = raw_.live_overflow,
            .stacks_dropped = raw_.stacks_dropped,
            .strings_dropped = raw_.strings_dropped,
            .timeline_samples = raw_.timeline_samples,
            .timeline_interval_ns = raw_.timeline_interval_ns,
            .free_unknown = raw_.free_unknown,
        };
        header.accounting = raw_.accounting;
        for (uint32_t device = 0; device < format::kMaxDevices; ++device) {
            const format::DeviceMemoryView& view = raw_.device_memory[device];
            // A view that contradicts itself (free above total) is corruption: left out, not trusted.
            if (view.total_bytes != 0 && view.lowest_free_bytes <= view.total_bytes &&
                view.last_free_bytes <= view.total_bytes)
                header.device_memory[device] = view;
        }
        decode_end();
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
            state != format::EndState::Exec) {
            warn(fmt::format("end record has unknown state {}; read as running", raw_.end_state));
            return;
        }
        end.state = state;
        end.exit_code = raw_.exit_code;
        end.signal = raw_.end_signal;
        end.monotonic_ns = raw_.end_monotonic_ns;
    }

    [[nodiscard]] std::vector<RegionSpec> region_specs() const {
        return {
            {"modules", raw_.modules, 0, 0},
            {"strings", raw_.strings, 0, 0},
            {"stacks", raw_.stacks, 0, 0},
            {"live", raw_.live, raw_.live_capacity, sizeof(format::LiveSlot)},
            {"ring", raw_.ring, raw_.ring_capacity, sizeof(format::EventRecord)},
            {"notable", raw_.notable, raw_.notable_capacity, sizeof(format::EventRecord)},
            {"timeline", raw_.timeline, raw_.timeline_capacity, sizeof(format::TimelineSample)},
        };
    }

    // After this, every region lies inside file_bytes and holds its capacity, so a slot index below the
    // capacity is in bounds of the region (though perhaps beyond the end of a truncated file).
    void check_regions() const {
        std::vector<RegionSpec> occupied;
        for (const RegionSpec& spec : region_specs()) {
            const Region& region = spec.region;
            if (region.offset % 64 != 0)
                fail(fmt::format("region '{}' is not 64-byte aligned", spec.name));
            if (spec.record_bytes != 0 && spec.capacity > region.size / spec.record_bytes)
                fail(fmt::format("region '{}' has room for {} records, header says {}", spec.name,
                                 region.size / spec.record_bytes, spec.capacity));
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

    // Walks an append-only stream. `decode` takes one complete record of the declared size and returns
    // nullptr once it has stored it, or why it is malformed.
    template <class Record, class Decode>
    void walk_stream(const char* name, const Region& region, uint64_t used, Decode decode) {
        const std::span<const std::byte> bytes = region_bytes(name, region);
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
                if (record.python_count != 0)
                    return "python frames, which format version 1 does not have";
                if (record.native_count > format::kMaxStackDepth)
                    return "more frames than any stack may have";
                if (bytes.size() != sizeof(record) + uint64_t{record.native_count} * sizeof(uint64_t))
                    return "size does not match its frame count";
                std::vector<uint64_t> frames(record.native_count);
                if (!frames.empty()) // an empty vector's data() may be null, which memcpy must not see
                    std::memcpy(frames.data(), bytes.data() + sizeof(record),
                                frames.size() * sizeof(uint64_t));
                if (!trace_.stacks_.try_emplace(record.id, std::move(frames)).second)
                    return "duplicate id";
                return nullptr;
            });
    }

    void decode_live() {
        const std::span<const std::byte> bytes = region_bytes("live", raw_.live);
        LiveSet& live = trace_.live_;
        for (uint64_t slot = 0; slot < raw_.live_capacity; ++slot) {
            format::LiveSlot record{};
            if (!copy_out(bytes, slot * sizeof(record), record))
                break;
            if (record.state == format::kSlotFree)
                continue;
            if (record.state != format::kSlotLive || record.kind == 0 || !valid_kind(record.kind) ||
                !valid_device(record.device)) {
                ++live.invalid_slots;
                continue;
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
            });
        }
        if (live.invalid_slots != 0)
            warn(fmt::format("live table: {} slots in flight or malformed, ignored", live.invalid_slots));
    }

    // Visits only the slots present in the file: the counters and capacities come from the header, and a
    // corrupt one must not make the reader spin through slots a truncated file does not have.
    void decode_ring() {
        const std::span<const std::byte> bytes = region_bytes("ring", raw_.ring);
        const uint64_t present = bytes.size() / sizeof(format::EventRecord);
        EventLog& log = trace_.events_;
        const uint64_t head = raw_.ring_head;
        const uint64_t capacity = raw_.ring_capacity;
        const uint64_t first = head > capacity ? head - capacity : 0;
        const uint64_t window = head - first;
        log.dropped = first;
        const auto read_slot = [&](uint64_t slot, uint64_t sequence) {
            format::EventRecord record{};
            copy_out(bytes, slot * sizeof(record), record);
            if (record.commit == sequence + 1 && valid_event(record))
                log.events.push_back(decode_event(record, sequence));
        };
        // At most this many are kept, whatever the counters say: growing by doubling instead would copy
        // the events again and again and, at the last doubling, hold up to twice their memory.
        log.events.reserve(std::min(window, present));
        // The window starts at slot first % capacity and, once the ring has wrapped, continues from slot 0.
        // The region may hold more slots than the capacity: those past it are not the ring's.
        const uint64_t start = capacity == 0 ? 0 : first % capacity;
        for (uint64_t slot = start; slot < std::min({start + window, capacity, present}); ++slot)
            read_slot(slot, first + (slot - start));
        if (start != 0)
            for (uint64_t slot = 0; slot < std::min(start, present); ++slot)
                read_slot(slot, first + (capacity - start) + slot);
        log.torn = window - log.events.size();
        if (log.torn != 0)
            warn(fmt::format("ring: {} of the last {} events torn or malformed, ignored", log.torn, window));
    }

    void decode_notable() {
        const std::span<const std::byte> bytes = region_bytes("notable", raw_.notable);
        const uint64_t present = bytes.size() / sizeof(format::EventRecord);
        EventLog& log = trace_.notable_;
        const uint64_t kept = std::min(raw_.notable_count, raw_.notable_capacity);
        log.dropped = raw_.notable_count - kept;
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
        std::vector<TimelineSample>& timeline = trace_.timeline_;
        for (uint64_t slot = 0; slot < raw_.timeline_capacity; ++slot) {
            format::TimelineSample record{};
            if (!copy_out(bytes, slot * sizeof(record), record))
                break;
            if (record.commit == 0)
                continue;
            TimelineSample sample{
                .sample = record.commit - 1, .time_ns = record.time_ns, .rss_bytes = record.rss_bytes};
            std::copy(std::begin(record.kind_bytes), std::end(record.kind_bytes), sample.kind_bytes.begin());
            std::copy(std::begin(record.device_bytes), std::end(record.device_bytes),
                      sample.device_bytes.begin());
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
    FileHeader raw_{};
};

TraceReader TraceReader::parse(std::span<const std::byte> bytes, const std::string& name) {
    TraceReader trace;
    Decoder(trace, bytes, name).run();
    return trace;
}

TraceReader TraceReader::open(const std::string& path) {
    const MappedFile file(path);
    return parse(file.bytes(), path);
}

} // namespace gpuleak::analyzer
