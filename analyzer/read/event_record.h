// One event as the analysis sees it, and the validation and decoding of the EventRecord it comes from,
// shared by the ring (read in place) and the notable array.
#pragma once

#include <array>
#include <cstdint>
#include <cstring>
#include <optional>

#include "gpuleak/trace_format.h"

namespace gpuleak::analyzer {

// A string of the trace's strings region as an event names it (format::StringRecord::id): a type of its
// own, so that a field holding one is read as one only through the accessor that says so.
struct StringId {
    uint64_t value = 0; // ids start at 1: 0 names no string
};

// An event's fields are named for an allocation; other event types give address, size, stream and result
// other meanings (format::EventType). The accessors below read them by those meanings, each for the
// event types its comment names.
struct Event {
    uint64_t sequence = 0; // ring: the event's number; notable: its commit word minus one
    uint64_t time_ns = 0;
    uint64_t address = 0;
    uint64_t size = 0;
    uint64_t stream = 0;
    uint32_t stack_id = 0;
    uint32_t thread_id = 0;
    format::EventType type = format::EventType::Alloc;
    format::MemoryKind kind = format::MemoryKind::None;
    uint8_t api = 0;
    int16_t device = 0;
    int32_t result = 0;

    // Alloc, Free and AllocFailed: the stream of an asynchronous call (0: none). A mapping's field holds
    // the handle it maps, and a sub-allocator's refusal the failures it gave up after: no stream.
    [[nodiscard]] uint64_t call_stream() const {
        return kind == format::MemoryKind::VmmMapping || refused_by_allocator() ? 0 : stream;
    }
    // AllocFailed: the device's free bytes as the driver (of a refusal: the allocator) saw them then;
    // none where it was not asked.
    [[nodiscard]] std::optional<uint64_t> free_bytes_then() const {
        return address != UINT64_MAX ? std::optional<uint64_t>(address) : std::nullopt;
    }
    // AllocFailed: a sub-allocator refused a block (gpuleak_block_alloc_failed).
    [[nodiscard]] bool refused_by_allocator() const {
        return type == format::EventType::AllocFailed && kind == format::MemoryKind::Block;
    }
    // A sub-allocator's refusal: the failed allocations of device memory on its device that its thread made
    // since its last successful one, which it gave up after (0: it refused by a limit of its own).
    [[nodiscard]] uint64_t failures_given_up_after() const { return stream; }
    // Marker: its label.
    [[nodiscard]] StringId marker_label() const { return {address}; }
    // Fork: the child's pid; none where the field holds no pid.
    [[nodiscard]] std::optional<int32_t> fork_child_pid() const {
        return address <= INT32_MAX ? std::optional<int32_t>(static_cast<int32_t>(address)) : std::nullopt;
    }
    // Fork: what forked the child, Unknown for a value the format does not define.
    [[nodiscard]] format::ForkOrigin fork_origin() const {
        const bool known = result == static_cast<int32_t>(format::ForkOrigin::DataLoader) ||
                           result == static_cast<int32_t>(format::ForkOrigin::Multiprocessing);
        return known ? static_cast<format::ForkOrigin>(result) : format::ForkOrigin::Unknown;
    }
    // SourceName: the file name Python code was compiled under, the name the program gave it ("cell
    // [12]"), and its text (no string where it did not fit).
    [[nodiscard]] StringId source_file() const { return {address}; }
    [[nodiscard]] StringId source_name() const { return {size}; }
    [[nodiscard]] StringId source_text() const { return {stream}; }
    // PythonFinalizing: the ring's head as Python began finalizing; the events numbered below it are the
    // program's.
    [[nodiscard]] uint64_t finalizing_ring_head() const { return size; }
    // Retainers: when gpuleak.why() searched ("end of epoch 3"), and the JSON document it wrote.
    [[nodiscard]] StringId retainers_label() const { return {address}; }
    [[nodiscard]] StringId retainers_document() const { return {size}; }
    // ProgramError: the JSON document of the exception.
    [[nodiscard]] StringId error_document() const { return {address}; }
    // Context: the device's UUID as its driver gave it, bytes 0-15; all zero where unknown.
    [[nodiscard]] std::array<uint8_t, 16> device_uuid() const {
        std::array<uint8_t, 16> uuid{};
        std::memcpy(uuid.data(), &address, sizeof address);
        std::memcpy(uuid.data() + sizeof address, &size, sizeof size);
        return uuid;
    }
};

inline bool valid_kind(uint8_t kind) {
    return kind < format::kKindCount;
}

// Ordinals >= kMaxDevices are legal (accounted in the last slot); below -2 nothing is defined.
inline bool valid_device(int16_t device) {
    return device >= -2;
}

inline bool valid_event(const format::EventRecord& record) {
    return record.type >= static_cast<uint16_t>(format::EventType::Alloc) &&
           record.type <= static_cast<uint16_t>(format::EventType::Context) && valid_kind(record.kind) &&
           valid_device(record.device);
}

inline Event decode_event(const format::EventRecord& record, uint64_t sequence) {
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

} // namespace gpuleak::analyzer
