// libFuzzer target for the trace reader. A trace is hostile input: parse() must end in a TraceError or a
// trace, so any other exception, a crash, a sanitizer report or a broken invariant below is a finding.
//
// Every accessor is read to the end so that ASan sees each byte the reader produced, and the
// invariants are the promises trace_reader.h makes to the analysis; the analysis indexes and subtracts
// with these values, so a result that breaks one is as much a bug as an out-of-bounds read.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "python/python_line_table.h"
#include "read/trace_reader.h"

namespace {

using gpuleak::analyzer::Event;
using gpuleak::analyzer::EventLog;
using gpuleak::analyzer::TraceError;
using gpuleak::analyzer::TraceReader;
namespace format = gpuleak::format;

// abort() rather than assert(): the check must hold in the release builds the fuzzer runs.
void require(bool holds, const char* promise) {
    if (!holds) {
        std::fprintf(stderr, "fuzz_trace_reader: broken invariant: %s\n", promise);
        std::abort();
    }
}

// Every byte read is folded into `sink`, which ends in a volatile store, so the optimizer cannot drop
// the reads that give ASan its chance to check them.
uint64_t sink = 0;
volatile uint64_t sink_out = 0;

void consume(const std::string& text) {
    for (const char c : text)
        sink += static_cast<unsigned char>(c);
}

void check_single_line(const std::string& text) {
    require(text.find('\n') == std::string::npos, "messages are one line");
}

void check_event(const Event& event) {
    require(event.type >= format::EventType::Alloc && event.type <= format::EventType::ProgramError,
            "event types are known");
    require(static_cast<uint8_t>(event.kind) < format::kKindCount, "event kinds are known");
    require(event.device >= -2, "event devices are ordinals, host or unknown");
    sink += event.sequence + event.time_ns + event.address + event.size + event.stream + event.stack_id +
            event.thread_id + event.api + static_cast<uint64_t>(event.result);
    consume(format::event_type_name(event.type));
    consume(format::kind_name(event.kind));
}

// `window` is how many events the header says the log should hold: torn counts those missing from it.
void check_log(const EventLog& log, uint64_t window) {
    require(log.events.size() <= window, "a log holds no more events than its window");
    require(log.torn == window - log.events.size(), "torn counts the window's missing events");
    for (const Event& event : log.events)
        check_event(event);
}

void check_trace(const TraceReader& trace) {
    const auto& header = trace.header();
    require(format::readable_format_version(header.format_version), "only the supported versions are read");
    require(header.file_bytes >= format::kHeaderBytes, "a file holds its header");
    require(header.hostname.size() <= sizeof(format::FileHeader::hostname), "hostname within its field");
    require(header.parent_trace.size() <= sizeof(format::FileHeader::parent_trace),
            "parent trace within its field");
    require(header.hostname.find('\0') == std::string::npos, "hostname ends at its NUL");
    require(header.parent_trace.find('\0') == std::string::npos, "parent trace ends at its NUL");
    consume(header.hostname);
    consume(header.parent_trace);
    uint64_t command_line_bytes = 0;
    for (const std::string& argument : header.command_line) {
        require(argument.find('\0') == std::string::npos, "arguments end at their NUL");
        command_line_bytes += argument.size() + 1;
        consume(argument);
    }
    require(command_line_bytes <= format::kCommandLineBytes + 1, "command line within its field");
    sink += header.flags + header.simulated_device() + header.has_flag(format::HeaderFlag::LiveUntracked) +
            static_cast<uint64_t>(header.pid) + static_cast<uint64_t>(header.ppid) +
            header.start_realtime_ns + header.start_monotonic_ns + header.stack_depth +
            header.timeline_interval_ms_initial;
    sink += header.live_capacity + header.ring_capacity + header.notable_capacity + header.timeline_capacity;
    const auto& counters = header.counters;
    sink += counters.ring_head + counters.notable_count + counters.modules_used + counters.strings_used +
            counters.stacks_used + counters.live_untracked + counters.stacks_dropped +
            counters.strings_dropped + counters.timeline_samples + counters.timeline_interval_ns +
            counters.free_unknown + counters.code_used + counters.code_dropped + header.python_version;
    for (uint32_t slot = 0; slot < format::kAccountingSlots; ++slot)
        for (uint32_t kind = 0; kind < format::kKindCount; ++kind)
            sink += header.accounting.live_bytes[slot][kind] + header.accounting.peak_bytes[slot][kind];
    for (const format::DeviceMemoryView& view : header.device_memory) {
        if (view.total_bytes == 0)
            require(view.lowest_free_bytes == 0 && view.last_free_bytes == 0,
                    "an unknown device view is empty");
        else
            require(view.lowest_free_bytes <= view.total_bytes && view.last_free_bytes <= view.total_bytes,
                    "a device never has more free memory than in all");
        sink += view.total_bytes + view.lowest_free_bytes + view.last_free_bytes;
    }
    const auto& end = header.end;
    require(end.state == format::EndState::Running || end.state == format::EndState::Exited ||
                end.state == format::EndState::Signaled || end.state == format::EndState::Exec,
            "end states are known");
    if (end.state == format::EndState::Running)
        require(end.exit_code == 0 && end.signal == 0 && end.monotonic_ns == 0,
                "a running process has no end fields");
    sink += static_cast<uint64_t>(end.exit_code) + static_cast<uint64_t>(end.signal) + end.monotonic_ns;

    for (const auto& module : trace.modules()) {
        require(module.build_id.size() <= sizeof(format::ModuleRecord::build_id),
                "build id within its field");
        consume(module.path);
        for (const uint8_t byte : module.build_id)
            sink += byte;
        sink += module.load_address + module.low + module.high;
    }
    for (const auto& [id, text] : trace.strings()) {
        require(id != 0, "string ids are not 0");
        consume(text);
    }
    for (const auto& [id, frames] : trace.stacks()) {
        require(id != 0, "stack ids are not 0");
        require(frames.size() <= format::kMaxStackDepth, "stacks within the deepest stack");
        for (const uint64_t frame : frames)
            sink += frame;
    }
    for (const auto& [id, code] : trace.code_objects()) {
        require(id != 0, "code ids are not 0");
        consume(code.filename);
        consume(code.qualname);
        for (const uint8_t byte : code.line_table)
            sink += byte;
        sink += static_cast<uint64_t>(code.first_line) + code.address + code.truncated;
    }
    // The analysis computes the line of every Python frame from its code object's line table, which is
    // as hostile as the rest of the file.
    for (const auto& [id, frames] : trace.python_stacks()) {
        require(trace.stacks().contains(id), "Python frames belong to a stack");
        require(!frames.empty() && frames.size() <= format::kMaxStackDepth,
                "Python frames within the deepest stack");
        for (const auto& frame : frames) {
            require(frame.instruction_offset <= format::kPythonOffsetMask,
                    "the flag is not part of the offset");
            sink += frame.code_id + frame.instruction_offset + frame.loop_entry;
            auto code = trace.code_objects().find(frame.code_id);
            if (code == trace.code_objects().end())
                continue;
            const std::optional<int32_t> line =
                gpuleak::analyzer::python_line_at(code->second.line_table, code->second.first_line,
                                                  frame.instruction_offset, header.python_version);
            sink += static_cast<uint64_t>(line.value_or(0));
        }
    }

    const auto& live = trace.live_allocations();
    require(live.allocations.size() + live.invalid_slots <= header.live_capacity,
            "live slots within the capacity");
    for (const auto& allocation : live.allocations) {
        require(allocation.kind != format::MemoryKind::None, "live allocations have a kind");
        require(static_cast<uint8_t>(allocation.kind) < format::kKindCount, "live kinds are known");
        require(allocation.device >= -2, "live devices are ordinals, host or unknown");
        sink += allocation.address + allocation.size + allocation.time_ns + allocation.stream +
                allocation.stack_id + allocation.thread_id + allocation.api;
        consume(format::kind_name(allocation.kind));
    }
    require(live.spilled.size() <= header.spill_capacity, "spill sites within the capacity");
    for (const auto& site : live.spilled) {
        require(site.count > 0, "only sites with live allocations");
        require(static_cast<uint8_t>(site.kind) < format::kKindCount, "spilled kinds are known");
        sink += site.stack_id + site.bytes;
        for (const auto& stretch : site.stretches) {
            require(stretch.first_sequence < stretch.end_sequence, "stretches are not empty");
            require(stretch.count > 0, "only stretches with live allocations");
            sink += stretch.first_time_ns + stretch.last_time_ns;
        }
    }

    // The ring holds the last ring_capacity of the ring_head events claimed, oldest first.
    const EventLog& events = trace.events();
    const uint64_t head = counters.ring_head;
    const uint64_t window = std::min(head, header.ring_capacity);
    require(events.dropped == head - window, "the ring drops what it overwrote");
    check_log(events, window);
    for (std::size_t i = 0; i < events.events.size(); ++i) {
        require(events.events[i].sequence >= events.dropped && events.events[i].sequence < head,
                "ring events lie in the window");
        if (i != 0)
            require(events.events[i - 1].sequence < events.events[i].sequence, "ring events oldest first");
    }

    const EventLog& notable = trace.notable_events();
    const uint64_t kept = std::min(counters.notable_count, header.notable_capacity);
    require(notable.dropped == counters.notable_count - kept, "notable events beyond capacity dropped");
    check_log(notable, kept);

    const auto& timeline = trace.timeline();
    require(timeline.size() <= header.timeline_capacity, "timeline within its capacity");
    std::vector<uint64_t> numbers;
    for (std::size_t i = 0; i < timeline.size(); ++i) {
        const auto& sample = timeline[i];
        if (i != 0)
            require(timeline[i - 1].time_ns <= sample.time_ns, "timeline in time order");
        numbers.push_back(sample.sample);
        sink += sample.sample + sample.time_ns + sample.rss_bytes;
        for (const uint64_t bytes : sample.kind_bytes)
            sink += bytes;
        for (const uint64_t bytes : sample.device_bytes)
            sink += bytes;
        for (const uint64_t bytes : sample.device_block_bytes)
            sink += bytes;
        for (const auto& said : sample.driver_said)
            if (said)
                sink += said->used_bytes + said->time_ns;
    }
    std::sort(numbers.begin(), numbers.end());
    require(std::adjacent_find(numbers.begin(), numbers.end()) == numbers.end(), "each sample once");

    for (const std::string& warning : trace.warnings()) {
        check_single_line(warning);
        consume(warning);
    }
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const std::string name = "fuzz.trace";
    const std::span<const std::byte> bytes(reinterpret_cast<const std::byte*>(data), size);
    try {
        check_trace(TraceReader::parse(bytes, name));
    } catch (const TraceError& error) {
        const std::string message = error.what();
        check_single_line(message);
        require(message.starts_with(name + ": "), "errors name the file");
    }
    sink_out = sink;
    return 0;
}
