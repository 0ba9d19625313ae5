// One event as the analysis sees it, and the validation and decoding of the EventRecord it comes from,
// shared by the ring (read in place) and the notable array.
#pragma once

#include <cstdint>

#include "gpuleak/trace_format.h"

namespace gpuleak::analyzer {

struct Event {
    uint64_t sequence = 0; // ring: the event's number; notable: its commit word minus one
    uint64_t time_ns = 0;
    uint64_t address = 0;
    uint64_t size = 0;
    uint64_t stream = 0; // a VmmMapping's: the handle it maps (format::EventRecord::stream)
    uint32_t stack_id = 0;
    uint32_t thread_id = 0;
    format::EventType type = format::EventType::Alloc;
    format::MemoryKind kind = format::MemoryKind::None;
    uint8_t api = 0;
    int16_t device = 0;
    int32_t result = 0;
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
           record.type <= static_cast<uint16_t>(format::EventType::ProgramError) && valid_kind(record.kind) &&
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
