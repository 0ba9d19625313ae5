// gpuleak-dump: prints everything the trace reader decodes, as text or JSON. A window onto trace files
// for tests and debugging until the real report exists; it interprets nothing.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <string>

#include "common/name_table.h"
#include "read/trace_reader.h"

namespace {

using gpuleak::analyzer::Event;
using gpuleak::analyzer::EventLog;
using gpuleak::analyzer::ProcessEnd;
using gpuleak::analyzer::StringId;
using gpuleak::analyzer::TraceError;
using gpuleak::analyzer::TraceReader;
namespace format = gpuleak::format;
using nlohmann::json;

std::string slot_name(uint32_t slot) {
    if (slot == format::kHostSlot)
        return "host";
    if (slot == format::kUnknownDeviceSlot)
        return "unknown";
    return fmt::format("device {}", slot);
}

std::string end_description(const ProcessEnd& end) {
    switch (end.state) {
    case format::EndState::Exited:
        return fmt::format("exited with status {}", end.exit_code);
    case format::EndState::Signaled:
        return fmt::format("killed by signal {}", end.signal);
    case format::EndState::Exec:
        return "replaced its image (exec)";
    case format::EndState::Detached:
        return "went on running (gpuleak attach detached)";
    case format::EndState::Running:
        break;
    }
    return "running or killed (no end record)";
}

const char* end_state_name(format::EndState state) {
    static constexpr gpuleak::NameTable kNames({{format::EndState::Running, "running"},
                                                {format::EndState::Exited, "exited"},
                                                {format::EndState::Signaled, "signaled"},
                                                {format::EndState::Exec, "exec"}},
                                               format::EndState::Running);
    return kNames[state];
}

std::string hex_bytes(const std::vector<uint8_t>& bytes) {
    std::string text;
    for (uint8_t byte : bytes)
        text += fmt::format("{:02x}", byte);
    return text;
}

// Calls visit(slot, kind, live, peak) for each accounting cell that is not all zero.
template <class Visit> void for_each_accounting(const format::Accounting& accounting, Visit visit) {
    for (uint32_t slot = 0; slot < format::kAccountingSlots; ++slot)
        for (uint32_t kind = 0; kind < format::kKindCount; ++kind)
            if (accounting.live_bytes[slot][kind] != 0 || accounting.peak_bytes[slot][kind] != 0)
                visit(slot, static_cast<format::MemoryKind>(kind), accounting.live_bytes[slot][kind],
                      accounting.peak_bytes[slot][kind]);
}

void print_live_only(const TraceReader& trace) {
    for (const auto& allocation : trace.live_allocations().allocations)
        fmt::print("{:#x} {} {} {}\n", allocation.address, allocation.size,
                   format::kind_name(allocation.kind), allocation.device);
}

void print_events(const char* title, const EventLog& log) {
    fmt::print("{}: {} (dropped {}, torn {})\n", title, log.events.size(), log.dropped, log.torn);
    for (const Event& e : log.events)
        fmt::print("  #{} t={} {} {} address={:#x} size={} device={} stack={} thread={} result={}\n",
                   e.sequence, e.time_ns, format::event_type_name(e.type), format::kind_name(e.kind),
                   e.address, e.size, e.device, e.stack_id, e.thread_id, e.result);
}

// SourceName records with their strings resolved: the event lines show only their ids.
void print_source_names(const TraceReader& trace) {
    const auto string_of = [&](StringId id) {
        const std::string* text = trace.string(id);
        return text != nullptr ? *text : std::string("?");
    };
    for (const Event& e : trace.notable_events().events)
        if (e.type == format::EventType::SourceName)
            fmt::print("source name: {} is {} ({} bytes of text)\n", string_of(e.source_file()),
                       string_of(e.source_name()),
                       e.source_text().value == 0 ? 0 : string_of(e.source_text()).size());
}

void print_text(const TraceReader& trace) {
    const auto& header = trace.header();
    fmt::print("trace format {}, pid {} (parent {}) on {}\n", header.format_version, header.pid, header.ppid,
               header.hostname);
    fmt::print("command: {}\n", fmt::join(header.command_line, " "));
    fmt::print("end: {}\n", end_description(header.end));
    fmt::print("flags:{}{}\n", header.simulated_device() ? " simulated device" : "",
               header.has_flag(format::HeaderFlag::LiveUntracked) ? " live allocations untracked" : "");
    if (!header.parent_trace.empty())
        fmt::print("parent trace: {}\n", header.parent_trace);
    fmt::print("started: realtime {} ns, monotonic {} ns; stack depth {}; Python {}.{}\n",
               header.start_realtime_ns, header.start_monotonic_ns, header.stack_depth,
               header.python_version >> 8, header.python_version & 0xff);
    const auto& counters = header.counters;
    fmt::print("counters: events {}, notable {}, live untracked {}, stacks dropped {}, strings dropped {}, "
               "code dropped {}, timeline samples {}, unknown frees {}\n",
               counters.ring_head, counters.notable_count, counters.live_untracked, counters.stacks_dropped,
               counters.strings_dropped, counters.code_dropped, counters.timeline_samples,
               counters.free_unknown);

    fmt::print("accounting:\n");
    for_each_accounting(
        header.accounting, [](uint32_t slot, format::MemoryKind kind, uint64_t live, uint64_t peak) {
            fmt::print("  {} {}: live {} peak {}\n", slot_name(slot), format::kind_name(kind), live, peak);
        });

    fmt::print("modules: {}\n", trace.modules().size());
    for (const auto& module : trace.modules())
        fmt::print("  {:#x}-{:#x} {} {}\n", module.low, module.high, module.path, hex_bytes(module.build_id));

    fmt::print("strings: {}\n", trace.strings().size());
    for (const auto& [id, text] : trace.strings())
        fmt::print("  {} {:?}\n", id, text);

    fmt::print("stacks: {}\n", trace.stacks().size());
    for (const auto& [id, frames] : trace.stacks()) {
        fmt::print("  {}: {:#x}", id, fmt::join(frames, " "));
        auto python = trace.python_stacks().find(id);
        if (python != trace.python_stacks().end())
            for (const auto& frame : python->second)
                fmt::print(" py:{}+{:#x}{}", frame.code_id, frame.instruction_offset,
                           frame.loop_entry ? " (loop entry)" : "");
        fmt::print("\n");
    }

    fmt::print("code objects: {}\n", trace.code_objects().size());
    for (const auto& [id, code] : trace.code_objects())
        fmt::print("  {} {:?} {:?} first line {}, line table {} bytes{}\n", id, code.filename, code.qualname,
                   code.first_line, code.line_table.size(), code.truncated ? ", truncated" : "");

    const auto& live = trace.live_allocations();
    fmt::print("live allocations: {} (invalid slots {})\n", live.allocations.size(), live.invalid_slots);
    for (const auto& a : live.allocations)
        fmt::print("  {:#x} {} {} device={} stack={} t={}\n", a.address, a.size, format::kind_name(a.kind),
                   a.device, a.stack_id, a.time_ns);
    fmt::print("spilled sites: {}\n", live.spilled.size());
    for (const auto& site : live.spilled) {
        fmt::print("  {} {} in {} device={} stack={}\n", format::kind_name(site.kind), site.bytes, site.count,
                   site.device, site.stack_id);
        for (const auto& stretch : site.stretches)
            fmt::print("    {} made in events [{}, {}) at t={}..{}\n", stretch.count, stretch.first_sequence,
                       stretch.end_sequence, stretch.first_time_ns, stretch.last_time_ns);
    }

    print_events("events", trace.events());
    print_events("notable events", trace.notable_events());
    print_source_names(trace);

    fmt::print("timeline: {}\n", trace.timeline().size());
    for (const auto& sample : trace.timeline()) {
        fmt::print("  t={} rss={} by kind [{}] by device [{}] blocks by device [{}]", sample.time_ns,
                   sample.rss_bytes, fmt::join(sample.kind_bytes, " "), fmt::join(sample.device_bytes, " "),
                   fmt::join(sample.device_block_bytes, " "));
        for (size_t device = 0; device < sample.driver_said.size(); ++device)
            if (const auto& said = sample.driver_said[device])
                fmt::print(" driver {} used={} t={}", device, said->used_bytes, said->time_ns);
        fmt::print("\n");
    }

    for (const auto& warning : trace.warnings())
        fmt::print("warning: {}\n", warning);
}

json event_json(const Event& e) {
    return {{"sequence", e.sequence},
            {"time_ns", e.time_ns},
            {"type", format::event_type_name(e.type)},
            {"kind", format::kind_name(e.kind)},
            {"address", e.address},
            {"size", e.size},
            {"stream", e.stream},
            {"device", e.device},
            {"stack_id", e.stack_id},
            {"thread_id", e.thread_id},
            {"api", e.api},
            {"result", e.result}};
}

json event_log_json(const EventLog& log) {
    json events = json::array();
    for (const Event& e : log.events)
        events.push_back(event_json(e));
    return {{"events", events}, {"dropped", log.dropped}, {"torn", log.torn}};
}

json to_json(const TraceReader& trace) {
    const auto& header = trace.header();
    const auto& counters = header.counters;
    json out;
    out["header"] = {
        {"format_version", header.format_version},
        {"file_bytes", header.file_bytes},
        {"pid", header.pid},
        {"ppid", header.ppid},
        {"command_line", header.command_line},
        {"hostname", header.hostname},
        {"parent_trace", header.parent_trace},
        {"start_realtime_ns", header.start_realtime_ns},
        {"start_monotonic_ns", header.start_monotonic_ns},
        {"flags", header.flags},
        {"simulated_device", header.simulated_device()},
        {"live_untracked_flag", header.has_flag(format::HeaderFlag::LiveUntracked)},
        {"stack_depth", header.stack_depth},
        {"python_version", header.python_version},
        {"timeline_interval_ms_initial", header.timeline_interval_ms_initial},
        {"capacities",
         {{"live", header.live_capacity},
          {"spill", header.spill_capacity},
          {"ring", header.ring_capacity},
          {"notable", header.notable_capacity},
          {"timeline", header.timeline_capacity}}},
        {"counters",
         {{"ring_head", counters.ring_head},
          {"notable_count", counters.notable_count},
          {"modules_used", counters.modules_used},
          {"strings_used", counters.strings_used},
          {"stacks_used", counters.stacks_used},
          {"live_untracked", counters.live_untracked},
          {"stacks_dropped", counters.stacks_dropped},
          {"strings_dropped", counters.strings_dropped},
          {"timeline_samples", counters.timeline_samples},
          {"timeline_interval_ns", counters.timeline_interval_ns},
          {"free_unknown", counters.free_unknown},
          {"code_used", counters.code_used},
          {"code_dropped", counters.code_dropped}}},
        {"end",
         {{"state", end_state_name(header.end.state)},
          {"exit_code", header.end.exit_code},
          {"signal", header.end.signal},
          {"monotonic_ns", header.end.monotonic_ns}}},
    };

    out["accounting"] = json::array();
    for_each_accounting(header.accounting,
                        [&out](uint32_t slot, format::MemoryKind kind, uint64_t live, uint64_t peak) {
                            out["accounting"].push_back({{"slot", slot_name(slot)},
                                                         {"kind", format::kind_name(kind)},
                                                         {"live_bytes", live},
                                                         {"peak_bytes", peak}});
                        });

    out["modules"] = json::array();
    for (const auto& module : trace.modules())
        out["modules"].push_back({{"path", module.path},
                                  {"build_id", hex_bytes(module.build_id)},
                                  {"load_address", module.load_address},
                                  {"low", module.low},
                                  {"high", module.high}});

    out["strings"] = json::array();
    for (const auto& [id, text] : trace.strings())
        out["strings"].push_back({{"id", id}, {"text", text}});

    out["stacks"] = json::array();
    for (const auto& [id, frames] : trace.stacks()) {
        json python = json::array();
        auto python_frames = trace.python_stacks().find(id);
        if (python_frames != trace.python_stacks().end())
            for (const auto& frame : python_frames->second)
                python.push_back({{"code_id", frame.code_id},
                                  {"instruction_offset", frame.instruction_offset},
                                  {"loop_entry", frame.loop_entry}});
        out["stacks"].push_back({{"id", id}, {"frames", frames}, {"python", python}});
    }

    out["code"] = json::array();
    for (const auto& [id, code] : trace.code_objects())
        out["code"].push_back({{"id", id},
                               {"filename", code.filename},
                               {"qualname", code.qualname},
                               {"first_line", code.first_line},
                               {"address", code.address},
                               {"line_table", code.line_table},
                               {"truncated", code.truncated}});

    json allocations = json::array();
    for (const auto& a : trace.live_allocations().allocations)
        allocations.push_back({{"address", a.address},
                               {"size", a.size},
                               {"kind", format::kind_name(a.kind)},
                               {"device", a.device},
                               {"stack_id", a.stack_id},
                               {"time_ns", a.time_ns},
                               {"stream", a.stream},
                               {"thread_id", a.thread_id},
                               {"api", a.api}});
    json spilled = json::array();
    for (const auto& site : trace.live_allocations().spilled) {
        json stretches = json::array();
        for (const auto& stretch : site.stretches)
            stretches.push_back({{"first_sequence", stretch.first_sequence},
                                 {"end_sequence", stretch.end_sequence},
                                 {"count", stretch.count},
                                 {"first_time_ns", stretch.first_time_ns},
                                 {"last_time_ns", stretch.last_time_ns}});
        spilled.push_back({{"kind", format::kind_name(site.kind)},
                           {"count", site.count},
                           {"bytes", site.bytes},
                           {"device", site.device},
                           {"stack_id", site.stack_id},
                           {"stretches", stretches}});
    }
    out["live"] = {{"allocations", allocations},
                   {"invalid_slots", trace.live_allocations().invalid_slots},
                   {"spilled", spilled}};

    out["events"] = event_log_json(trace.events());
    out["notable"] = event_log_json(trace.notable_events());

    out["timeline"] = json::array();
    for (const auto& sample : trace.timeline()) {
        json driver = json::object();
        for (size_t device = 0; device < sample.driver_said.size(); ++device)
            if (const auto& said = sample.driver_said[device])
                driver[std::to_string(device)] = {{"used_bytes", said->used_bytes},
                                                  {"time_ns", said->time_ns}};
        out["timeline"].push_back({{"sample", sample.sample},
                                   {"time_ns", sample.time_ns},
                                   {"rss_bytes", sample.rss_bytes},
                                   {"kind_bytes", sample.kind_bytes},
                                   {"device_bytes", sample.device_bytes},
                                   {"device_block_bytes", sample.device_block_bytes},
                                   {"driver_said", std::move(driver)}});
    }

    out["warnings"] = trace.warnings();
    return out;
}

} // namespace

int main(int argc, char** argv) {
    CLI::App app{"Print a gpuleak trace file"};
    std::string path;
    bool as_json = false;
    bool live_only = false;
    app.add_option("trace", path, "trace file")->required();
    auto* json_flag = app.add_flag("--json", as_json, "print JSON");
    app.add_flag("--live-only", live_only, "print only the live allocations: ADDRESS SIZE KIND DEVICE")
        ->excludes(json_flag);
    CLI11_PARSE(app, argc, argv);

    try {
        const TraceReader trace = TraceReader::open(path);
        if (live_only)
            print_live_only(trace);
        else if (as_json)
            // The program's strings (labels, file names) may not be UTF-8, which JSON must be.
            fmt::print("{}\n", to_json(trace).dump(2, ' ', false, json::error_handler_t::replace));
        else
            print_text(trace);
    } catch (const TraceError& error) {
        fmt::print(stderr, "gpuleak-dump: {}\n", error.what());
        return 2;
    }
    return 0;
}
