// Writes the fuzzer's seed corpus: small valid traces, each reaching one part of the reader that
// random bytes would take the fuzzer long to find (a header that passes every check, committed
// records, wrapped and torn rings). Generated at test time from the test builder rather than committed
// as binaries, so the seeds follow the format when it changes.
//
// Usage: make_seed_corpus DIRECTORY
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "trace_builder.h"

namespace {

namespace format = gpuleak::format;
using gpuleak::test::TraceBuilder;
using gpuleak::test::TraceLayout;

// Small capacities keep each seed near the 8 KiB header: the fuzzer's speed falls with input size.
TraceLayout small_layout() {
    return TraceLayout{
        .modules_bytes = 512,
        .strings_bytes = 256,
        .stacks_bytes = 256,
        .live_capacity = 4,
        .ring_capacity = 4,
        .notable_capacity = 2,
        .timeline_capacity = 2,
        .code_bytes = 256,
    };
}

format::EventRecord event(format::EventType type, uint64_t address, uint64_t time_ns) {
    format::EventRecord record{};
    record.type = static_cast<uint16_t>(type);
    record.kind = static_cast<uint8_t>(format::MemoryKind::Device);
    record.address = address;
    record.size = 4096;
    record.time_ns = time_ns;
    record.stack_id = 1;
    return record;
}

format::LiveSlot live_slot(uint64_t address, format::MemoryKind kind, int16_t device) {
    format::LiveSlot slot{};
    slot.state = format::kSlotLive;
    slot.address = address;
    slot.size = 4096;
    slot.kind = static_cast<uint8_t>(kind);
    slot.device = device;
    slot.stack_id = 1;
    return slot;
}

format::TimelineSample sample(uint64_t commit, uint64_t time_ns) {
    format::TimelineSample record{};
    record.commit = commit;
    record.time_ns = time_ns;
    record.rss_bytes = 1 << 20;
    record.kind_bytes[1] = 8192;
    record.device_bytes[0] = 8192;
    record.device_block_bytes[0] = 4096;
    record.driver_used_bytes[0] = 1 << 29;
    record.driver_said_ns[0] = time_ns;
    return record;
}

// Everything the format has, once, in a process that exited.
TraceBuilder complete() {
    TraceBuilder builder(small_layout());
    format::FileHeader& header = builder.header();
    header.pid = 4242;
    header.ppid = 1;
    header.flags = static_cast<uint32_t>(format::HeaderFlag::SimulatedDevice);
    header.stack_depth = 64;
    header.timeline_interval_ms_initial = 100;
    header.timeline_samples = 1;
    header.timeline_interval_ns = 100'000'000;
    header.accounting.live_bytes[0][1] = 4096;
    header.accounting.peak_bytes[0][1] = 8192;
    header.device_memory[0] = {
        .total_bytes = 1 << 30, .lowest_free_bytes = 1 << 20, .last_free_bytes = 1 << 29, .last_time_ns = 1};
    std::strcpy(header.hostname, "node7");
    std::strcpy(header.parent_trace, "/tmp/gpuleak.41.trace");
    builder.set_command_line({"python", "train.py"});
    builder.add_module("/usr/lib/libcudart.so.13", {0xde, 0xad, 0xbe, 0xef}, 0x7f0000000000, 0x7f0000001000,
                       0x7f0000009000);
    builder.add_module("/bin/prog", {}, 0, 0x400000, 0x401000);
    builder.add_string(1, "epoch 1");
    builder.add_stack(1, {0x401234, 0x7f0000001111});
    builder.add_stack(2, {});
    builder.set_live(1, live_slot(0xa000, format::MemoryKind::Device, 0));
    builder.append_event(event(format::EventType::Alloc, 0xa000, 10));
    builder.append_event(event(format::EventType::Alloc, 0xb000, 20));
    builder.append_event(event(format::EventType::Free, 0xb000, 30));
    format::EventRecord marker = event(format::EventType::Marker, 1, 40);
    marker.kind = 0;
    builder.append_event(marker);
    builder.add_notable(marker);
    builder.set_timeline(0, sample(1, 50));
    builder.end_exited(0, 60);
    return builder;
}

// A ring that wrapped twice over, with one event in flight and one slot still holding the event it
// replaced; the process was killed, so there is no end record.
TraceBuilder wrapped_ring() {
    TraceBuilder builder(small_layout());
    std::vector<uint64_t> offsets;
    for (uint64_t i = 0; i < 11; ++i)
        offsets.push_back(builder.append_event(event(format::EventType::Alloc, 0x1000 + i, i)));
    builder.put<uint64_t>(offsets[8], 0);
    builder.put<uint64_t>(offsets[9], 9 + 1 - 4);
    return builder;
}

// Each append-only stream ends in a record that was being written: the header counts it, its commit
// word is not there yet.
TraceBuilder torn_streams() {
    TraceBuilder builder(small_layout());
    builder.add_module("/lib/a.so", {1, 2, 3}, 0x1000, 0x1000, 0x2000);
    builder.put<uint32_t>(builder.add_module("/lib/b.so", {}, 0x3000, 0x3000, 0x4000), 0);
    builder.add_string(1, "first");
    builder.put<uint32_t>(builder.add_string(2, "second"), 0);
    builder.add_stack(1, {1, 2, 3});
    builder.put<uint32_t>(builder.add_stack(2, {4}), 0);
    builder.add_code(1, "a.py", "f", 1, {2, 1});
    builder.put<uint32_t>(builder.add_code(2, "b.py", "g", 1, {2, 1}), 0);
    return builder;
}

// A ring region with room to spare: the header may promise fewer slots than the region holds, and
// the slots past the capacity are not the ring's.
TraceBuilder ring_spare_room() {
    TraceLayout layout = small_layout();
    layout.ring_capacity = 8;
    TraceBuilder builder(layout);
    for (uint64_t i = 0; i < 6; ++i)
        builder.append_event(event(format::EventType::Alloc, 0x1000 + i, i));
    builder.header().ring_capacity = 4;
    return builder;
}

// Records that repeat an id: the walk keeps the first and stops there.
TraceBuilder duplicate_ids() {
    TraceBuilder builder(small_layout());
    builder.add_string(1, "first");
    builder.add_string(1, "again");
    builder.add_stack(1, {1});
    builder.add_stack(1, {2});
    builder.add_code(1, "a.py", "f", 1, {});
    builder.add_code(1, "b.py", "g", 1, {});
    return builder;
}

// Live slots in every state: live, free, in flight (no state word yet), and live ones of each key space,
// left by an image that exec replaced.
TraceBuilder live_slots() {
    TraceBuilder builder(small_layout());
    builder.header().end_state = static_cast<uint32_t>(format::EndState::Exec);
    builder.header().end_monotonic_ns = 50;
    builder.header().end_commit = format::kEndCommit;
    builder.header().flags = static_cast<uint32_t>(format::HeaderFlag::LiveUntracked);
    builder.header().live_untracked = 2;
    builder.set_live(0, live_slot(0x1000, format::MemoryKind::Managed, 1));
    format::LiveSlot in_flight = live_slot(0x2000, format::MemoryKind::Device, 0);
    in_flight.state = 0x12345678;
    builder.set_live(1, in_flight);
    builder.set_live(2, live_slot(0x3000, format::MemoryKind::VmmMapping, -2));
    builder.set_live(3, live_slot(0x4000, format::MemoryKind::PinnedHost, -1));
    return builder;
}

// Stripes of two slots with every kind of mark: one that covers its live slot, one that stops short of
// a live slot (which is then not read), and marks past the end of their stripes (read whole, with a
// warning).
TraceBuilder live_marks() {
    TraceLayout layout = small_layout();
    layout.live_capacity = 2 * format::kLiveStripes;
    TraceBuilder builder(layout);
    builder.set_live(0, live_slot(0x1000, format::MemoryKind::Device, 0));
    builder.set_live(3, live_slot(0x2000, format::MemoryKind::Device, 0));
    builder.set_live_mark(1, 1);
    builder.set_live(5, live_slot(0x3000, format::MemoryKind::Block, 0));
    builder.set_live_mark(2, 3);
    builder.set_live_mark(63, ~uint64_t{0});
    return builder;
}

// Allocations past the live table, counted by site: the unattributed record, a site with live ones, one
// whose tally a writer was changing (version odd), one all freed, and one in flight.
TraceBuilder spilled_sites() {
    TraceLayout layout = small_layout();
    layout.spill_capacity = 6;
    TraceBuilder builder(layout);
    const auto site = [](uint32_t stack_id, format::MemoryKind kind, uint32_t version, uint64_t count) {
        format::SpillSite record{};
        record.stack_id = stack_id;
        record.kind = static_cast<uint8_t>(kind);
        record.version = version;
        record.tally[version % 2] = {count, count * 512};
        record.tally[(version + 1) % 2] = {count + 1, count * 512 + 512};
        record.bucket_shift = static_cast<uint8_t>(version);
        record.buckets[0] = {count / 2, 10, 20};
        record.buckets[format::kSpillBuckets - 1] = {count - count / 2, 80, 90};
        return record;
    };
    builder.set_spill(0, site(0, format::MemoryKind::None, 0, 1));
    builder.set_spill(1, site(1, format::MemoryKind::Block, 4, 3));
    builder.set_spill(2, site(2, format::MemoryKind::Device, 7, 2));
    builder.set_spill(3, site(3, format::MemoryKind::Block, 2, 0));
    format::SpillSite in_flight = site(4, format::MemoryKind::Block, 0, 1);
    in_flight.commit = 0x1234;
    builder.set_spill(4, in_flight);
    return builder;
}

// A timeline caught mid-thinning: one sample in two slots, slots out of time order.
TraceBuilder timeline() {
    TraceLayout layout = small_layout();
    layout.timeline_capacity = 4;
    TraceBuilder builder(layout);
    builder.header().timeline_samples = 9;
    builder.header().timeline_interval_ns = 400'000'000;
    builder.set_timeline(0, sample(9, 900));
    builder.set_timeline(1, sample(1, 100));
    builder.set_timeline(2, sample(9, 900));
    builder.set_timeline(3, sample(5, 500));
    return builder;
}

// A notebook's cell named for the report (format 5): its file name, its name and its text as strings, and
// a SourceName record naming them; a second record names strings that are not there.
TraceBuilder named_source() {
    TraceBuilder builder(small_layout());
    builder.add_string(1, "/tmp/ipykernel_7/1.py");
    builder.add_string(2, "cell [3]");
    builder.add_string(3, "import x\ny = x.f()\n");
    format::EventRecord named = event(format::EventType::SourceName, 1, 10);
    named.kind = 0;
    named.size = 2;
    named.stream = 3;
    builder.add_notable(named);
    named.address = 9;
    builder.add_notable(named);
    return builder;
}

// A Python program whose interpreter began finalizing (format 6) after its allocations and well before
// it exited.
TraceBuilder python_finalizing() {
    TraceBuilder builder(small_layout());
    for (uint64_t slot = 0; slot < 3; ++slot) {
        format::LiveSlot live = live_slot(0xa000 + slot * 0x1000, format::MemoryKind::Device, 0);
        live.time_ns = 10 + slot * 10;
        builder.set_live(slot, live);
    }
    format::EventRecord finalizing = event(format::EventType::PythonFinalizing, 0, 40);
    finalizing.kind = 0;
    finalizing.size = 0;
    finalizing.stack_id = 0;
    finalizing.device = -2;
    builder.add_notable(finalizing);
    builder.end_exited(0, 400);
    return builder;
}

// Pinned memory made on a thread whose start was recorded (format 13), twice with the same thread id,
// and a start that names the stack its own thread made.
TraceBuilder thread_starts() {
    TraceBuilder builder(small_layout());
    builder.add_stack(1, {0x1000});
    builder.add_stack(2, {0x2000});
    for (uint64_t slot = 0; slot < 3; ++slot) {
        format::LiveSlot live = live_slot(0xa000 + slot * 0x1000, format::MemoryKind::PinnedHost, -1);
        live.time_ns = 10 + slot * 10;
        live.thread_id = 7;
        live.stack_id = slot == 2 ? 2 : 1;
        builder.set_live(slot, live);
    }
    for (const auto& [time_ns, stack_id] : {std::pair<uint64_t, uint32_t>{5, 2}, {25, 2}}) {
        format::EventRecord started = event(format::EventType::ThreadStart, 0, time_ns);
        started.thread_id = 7;
        started.stack_id = stack_id;
        started.device = -2;
        builder.add_notable(started);
    }
    builder.end_exited(0, 400);
    return builder;
}

// A Python program that ended with an exception (format 16): the document names its frames, and a
// failed allocation it reports.
TraceBuilder program_error() {
    TraceBuilder builder(small_layout());
    format::EventRecord failure = event(format::EventType::AllocFailed, 0, 10);
    failure.result = 2;
    builder.add_notable(failure);
    builder.add_string(1, R"({"type":"torch.OutOfMemoryError","message":"CUDA out of memory",)"
                          R"("frames":[["/srv/train.py",12,"<module>"],["/srv/train.py",3,"step"]]})");
    format::EventRecord error = event(format::EventType::ProgramError, 1, 20);
    error.device = -2;
    builder.add_notable(error);
    builder.end_exited(1, 40);
    return builder;
}

// More notable events than the array holds, one torn, and a process ended by a signal.
TraceBuilder notable_overflow() {
    TraceBuilder builder(small_layout());
    format::EventRecord failure = event(format::EventType::AllocFailed, 0, 10);
    failure.result = 2;
    builder.add_notable(failure);
    builder.add_notable(event(format::EventType::Fork, 4243, 20));
    builder.add_notable(event(format::EventType::Marker, 1, 30));
    builder.put<uint64_t>(builder.header().notable.offset, 0);
    builder.end_signaled(9, 40);
    return builder;
}

// A Python program's stacks: native and Python frames, some of them loop entries, code objects with
// line tables in the format of `version`, one truncated, and frames whose code objects did not fit (id
// 0) or are missing, so that the line-table decoder runs on what the fuzzer makes of the tables.
TraceBuilder python_frames(uint16_t version) {
    TraceBuilder builder(small_layout());
    builder.header().python_version = version;
    builder.header().code_dropped = 1;
    const bool location_table = version >= format::python_version(3, 11);
    const std::vector<uint8_t> table = location_table ? std::vector<uint8_t>{0xd9, 0x02, 0x05, 0x88, 0x02}
                                                      : std::vector<uint8_t>{6, 1, 0, 2, 4, 0x80, 8, 0xff};
    builder.add_code(1, "/srv/train.py", "Trainer.step", 40, table);
    builder.add_code(2, "/srv/モデル.py", "<module>", 1, {table.begin(), table.begin() + 2},
                     static_cast<uint32_t>(format::CodeFlag::Truncated));
    builder.add_stack(1, {0x7f0000001111, 0x401234},
                      {{1, 4 | format::kPythonFrameLoopEntry},
                       {2, format::kPythonOffsetBeforeFirstInstruction | format::kPythonFrameLoopEntry}});
    builder.add_stack(2, {}, {{0, 2}, {7, 0 | format::kPythonFrameLoopEntry}, {1, 1000}});
    builder.set_live(0, live_slot(0xa000, format::MemoryKind::Device, 0));
    return builder;
}

// No regions at all: the smallest trace the reader accepts.
TraceBuilder empty() {
    return TraceBuilder(TraceLayout{
        .modules_bytes = 0,
        .strings_bytes = 0,
        .stacks_bytes = 0,
        .live_capacity = 0,
        .ring_capacity = 0,
        .notable_capacity = 0,
        .timeline_capacity = 0,
        .code_bytes = 0,
    });
}

bool write(const std::filesystem::path& path, const std::vector<std::byte>& bytes) {
    std::ofstream out(path, std::ios::binary);
    out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
    out.close();
    if (!out) {
        std::fprintf(stderr, "make_seed_corpus: cannot write %s\n", path.c_str());
        return false;
    }
    return true;
}

} // namespace

int main(int argc, char** argv) {
    if (argc != 2) {
        std::fprintf(stderr, "usage: make_seed_corpus DIRECTORY\n");
        return 2;
    }
    const std::filesystem::path directory = argv[1];
    std::error_code error;
    std::filesystem::create_directories(directory, error);
    if (error) {
        std::fprintf(stderr, "make_seed_corpus: cannot create %s: %s\n", directory.c_str(),
                     error.message().c_str());
        return 1;
    }
    std::vector<std::byte> truncated = complete().bytes();
    truncated.resize(complete().header().ring.offset + sizeof(format::EventRecord) + 8);
    const std::vector<std::pair<std::string, std::vector<std::byte>>> seeds = {
        {"complete", complete().bytes()},
        {"wrapped_ring", wrapped_ring().bytes()},
        {"ring_spare_room", ring_spare_room().bytes()},
        {"duplicate_ids", duplicate_ids().bytes()},
        {"torn_streams", torn_streams().bytes()},
        {"live_slots", live_slots().bytes()},
        {"live_marks", live_marks().bytes()},
        {"spilled_sites", spilled_sites().bytes()},
        {"timeline", timeline().bytes()},
        {"python_3_10", python_frames(format::python_version(3, 10)).bytes()},
        {"python_3_12", python_frames(format::python_version(3, 12)).bytes()},
        {"notable_overflow", notable_overflow().bytes()},
        {"named_source", named_source().bytes()},
        {"python_finalizing", python_finalizing().bytes()},
        {"thread_starts", thread_starts().bytes()},
        {"program_error", program_error().bytes()},
        {"truncated", truncated},
        {"empty", empty().bytes()},
    };
    for (const auto& [name, bytes] : seeds)
        if (!write(directory / (name + ".trace"), bytes))
            return 1;
    return 0;
}
