#include <catch2/catch.hpp>

#include <fmt/format.h>
#include <fstream>
#include <random>
#include <string>

#include <csignal>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

#include "read/trace_reader.h"
#include "temp_dir.h"
#include "trace_builder.h"

using gpuleak::analyzer::Event;
using gpuleak::analyzer::TraceError;
using gpuleak::analyzer::TraceReader;
using gpuleak::test::TraceBuilder;
using gpuleak::test::TraceLayout;
namespace format = gpuleak::format;

namespace {

std::string write_file(const TempDir& dir, const std::string& name, std::span<const std::byte> bytes) {
    const std::string path = dir.path() + "/" + name;
    std::ofstream(path, std::ios::binary)
        .write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
    return path;
}

format::EventRecord event(format::EventType type, uint64_t address, uint64_t time_ns) {
    format::EventRecord record{};
    record.type = static_cast<uint16_t>(type);
    record.kind = static_cast<uint8_t>(format::MemoryKind::Device);
    record.address = address;
    record.size = 4096;
    record.time_ns = time_ns;
    return record;
}

format::LiveSlot live_slot(uint64_t address, uint64_t size, format::MemoryKind kind, int16_t device) {
    format::LiveSlot slot{};
    slot.state = format::kSlotLive;
    slot.address = address;
    slot.size = size;
    slot.kind = static_cast<uint8_t>(kind);
    slot.device = device;
    return slot;
}

TraceReader parse(const std::vector<std::byte>& bytes) {
    return TraceReader::parse(bytes, "trace.bin");
}

std::vector<uint64_t> addresses(const std::vector<Event>& events) {
    std::vector<uint64_t> result;
    for (const Event& e : events)
        result.push_back(e.address);
    return result;
}

bool has_warning(const TraceReader& trace, const std::string& part) {
    for (const std::string& warning : trace.warnings())
        if (warning.find(part) != std::string::npos)
            return true;
    return false;
}

// Bad input must end in a one-line TraceError or a trace; anything else (a crash, an out-of-bounds read
// under ASan, another exception type) fails the test.
void parse_without_crash(const std::vector<std::byte>& bytes) {
    try {
        const TraceReader trace = parse(bytes);
        for (const std::string& warning : trace.warnings())
            REQUIRE(warning.find('\n') == std::string::npos);
    } catch (const TraceError& error) {
        REQUIRE(std::string(error.what()).find('\n') == std::string::npos);
        REQUIRE(std::string(error.what()).starts_with("trace.bin: "));
    }
}

TraceBuilder full_trace() {
    TraceBuilder builder;
    format::FileHeader& header = builder.header();
    header.pid = 4242;
    header.ppid = 1;
    header.flags = static_cast<uint32_t>(format::HeaderFlag::SimulatedDevice);
    header.start_realtime_ns = 1'700'000'000'000'000'000;
    header.start_monotonic_ns = 5'000;
    header.stack_depth = 64;
    header.timeline_interval_ms_initial = 100;
    std::strcpy(header.hostname, "node7");
    std::strcpy(header.parent_trace, "/tmp/gpuleak.41.bin");
    header.live_untracked = 3;
    header.stacks_dropped = 4;
    header.strings_dropped = 5;
    header.timeline_samples = 6;
    header.timeline_interval_ns = 200'000'000;
    header.free_unknown = 7;
    header.accounting.live_bytes[0][1] = 8192;
    header.accounting.peak_bytes[0][1] = 16384;
    header.accounting.live_bytes[format::kHostSlot][3] = 512;
    builder.set_command_line({"python", "train.py", "--epochs=3"});
    builder.add_module("/usr/lib/libfoo.so", {0xde, 0xad, 0xbe, 0xef}, 0x7f0000000000, 0x7f0000001000,
                       0x7f0000009000);
    builder.add_module("/bin/prog", {}, 0, 0x400000, 0x401000);
    builder.add_string(1, "epoch 1");
    builder.add_string(2, "");
    builder.add_stack(1, {0x401234, 0x7f0000001111});
    builder.add_stack(2, {});
    builder.set_live(3, live_slot(0xa000, 8192, format::MemoryKind::Device, 0));
    builder.set_live(9, live_slot(0xb000, 512, format::MemoryKind::PinnedHost, -1));
    builder.append_event(event(format::EventType::Alloc, 0xa000, 10));
    builder.append_event(event(format::EventType::Free, 0xa000, 20));
    format::EventRecord failure = event(format::EventType::AllocFailed, 0, 30);
    failure.result = 2;
    failure.stack_id = 1;
    failure.thread_id = 77;
    failure.stream = 0x55;
    failure.device = 1;
    failure.api = 9;
    builder.append_event(failure);
    builder.add_notable(failure);
    format::TimelineSample sample{};
    sample.commit = 1;
    sample.time_ns = 100;
    sample.rss_bytes = 1 << 20;
    sample.kind_bytes[1] = 8192;
    sample.device_bytes[0] = 8192;
    builder.set_timeline(0, sample);
    builder.end_exited(3, 999);
    return builder;
}

} // namespace

TEST_CASE("a valid trace round-trips every field") {
    const TraceReader trace = parse(full_trace().bytes());
    const auto& header = trace.header();
    CHECK(trace.warnings().empty());
    CHECK(header.format_version == format::kFormatVersion);
    CHECK(header.pid == 4242);
    CHECK(header.ppid == 1);
    CHECK(header.simulated_device());
    CHECK_FALSE(header.has_flag(format::HeaderFlag::LiveUntracked));
    CHECK(header.start_realtime_ns == 1'700'000'000'000'000'000);
    CHECK(header.start_monotonic_ns == 5'000);
    CHECK(header.stack_depth == 64);
    CHECK(header.timeline_interval_ms_initial == 100);
    CHECK(header.hostname == "node7");
    CHECK(header.parent_trace == "/tmp/gpuleak.41.bin");
    CHECK(header.command_line == std::vector<std::string>{"python", "train.py", "--epochs=3"});
    CHECK(header.live_capacity == 16);
    CHECK(header.ring_capacity == 8);
    CHECK(header.notable_capacity == 4);
    CHECK(header.timeline_capacity == 8);
    CHECK(header.counters.ring_head == 3);
    CHECK(header.counters.notable_count == 1);
    CHECK(header.counters.live_untracked == 3);
    CHECK(header.counters.stacks_dropped == 4);
    CHECK(header.counters.strings_dropped == 5);
    CHECK(header.counters.timeline_samples == 6);
    CHECK(header.counters.timeline_interval_ns == 200'000'000);
    CHECK(header.counters.free_unknown == 7);
    CHECK(header.accounting.live_bytes[0][1] == 8192);
    CHECK(header.accounting.peak_bytes[0][1] == 16384);
    CHECK(header.accounting.live_bytes[format::kHostSlot][3] == 512);
    CHECK(header.end.state == format::EndState::Exited);
    CHECK(header.end.exit_code == 3);
    CHECK(header.end.monotonic_ns == 999);

    REQUIRE(trace.modules().size() == 2);
    CHECK(trace.modules()[0].path == "/usr/lib/libfoo.so");
    CHECK(trace.modules()[0].build_id == std::vector<uint8_t>{0xde, 0xad, 0xbe, 0xef});
    CHECK(trace.modules()[0].load_address == 0x7f0000000000);
    CHECK(trace.modules()[0].low == 0x7f0000001000);
    CHECK(trace.modules()[0].high == 0x7f0000009000);
    CHECK(trace.modules()[1].path == "/bin/prog");
    CHECK(trace.modules()[1].build_id.empty());

    CHECK(trace.strings() == std::map<uint32_t, std::string>{{1, "epoch 1"}, {2, ""}});
    CHECK(trace.stacks() ==
          std::map<uint32_t, std::vector<uint64_t>>{{1, {0x401234, 0x7f0000001111}}, {2, {}}});

    const auto& live = trace.live_allocations();
    CHECK(live.invalid_slots == 0);
    REQUIRE(live.allocations.size() == 2);
    CHECK(live.allocations[0].address == 0xa000);
    CHECK(live.allocations[0].size == 8192);
    CHECK(live.allocations[0].kind == format::MemoryKind::Device);
    CHECK(live.allocations[0].device == 0);
    CHECK(live.allocations[1].kind == format::MemoryKind::PinnedHost);
    CHECK(live.allocations[1].device == -1);

    const auto& events = trace.events();
    CHECK(events.dropped == 0);
    CHECK(events.torn == 0);
    REQUIRE(events.events.size() == 3);
    CHECK(events.events[0].type == format::EventType::Alloc);
    CHECK(events.events[1].type == format::EventType::Free);
    const Event& failed = events.events[2];
    CHECK(failed.sequence == 2);
    CHECK(failed.type == format::EventType::AllocFailed);
    CHECK(failed.result == 2);
    CHECK(failed.stack_id == 1);
    CHECK(failed.thread_id == 77);
    CHECK(failed.stream == 0x55);
    CHECK(failed.device == 1);
    CHECK(failed.api == 9);
    CHECK(failed.time_ns == 30);
    CHECK(failed.size == 4096);

    REQUIRE(trace.notable_events().events.size() == 1);
    CHECK(trace.notable_events().events[0].type == format::EventType::AllocFailed);
    CHECK(trace.notable_events().events[0].sequence == 0);

    REQUIRE(trace.timeline().size() == 1);
    CHECK(trace.timeline()[0].time_ns == 100);
    CHECK(trace.timeline()[0].rss_bytes == 1 << 20);
    CHECK(trace.timeline()[0].kind_bytes[1] == 8192);
    CHECK(trace.timeline()[0].device_bytes[0] == 8192);
}

TEST_CASE("a trace of format 19 names its job, and an older one none whatever its header's tail holds") {
    TraceBuilder builder;
    builder.header().node_rank = 2;
    builder.header().slurm_task = 17;
    builder.header().slurm_local_task = 1;
    builder.header().slurm_tasks = 32;
    std::snprintf(builder.header().job, sizeof builder.header().job, "%s", "4242");
    const TraceReader current = TraceReader::parse(builder.bytes(), "trace.bin");
    CHECK(current.header().node_rank == 2);
    CHECK(current.header().slurm_task == 17);
    CHECK(current.header().slurm_local_task == 1);
    CHECK(current.header().slurm_tasks == 32);
    CHECK(current.header().job == "4242");
    builder.header().format_version = 18;
    const TraceReader older = TraceReader::parse(builder.bytes(), "trace.bin");
    CHECK(older.header().node_rank == -1);
    CHECK(older.header().slurm_task == -1);
    CHECK(older.header().slurm_local_task == -1);
    CHECK(older.header().slurm_tasks == -1);
    CHECK(older.header().job.empty());
}

TEST_CASE("a trace is read from a file as from memory") {
    const TempDir dir;
    const std::string path = write_file(dir, "trace.bin", full_trace().bytes());
    const TraceReader trace = TraceReader::open(path);
    CHECK(trace.header().pid == 4242);
    CHECK(trace.live_allocations().allocations.size() == 2);
}

TEST_CASE("a trace cut shorter while it is mapped reads as never written there, and says it shrank") {
    const TempDir dir;
    const std::string path = write_file(dir, "trace.bin", full_trace().bytes());
    const TraceReader trace = TraceReader::open(path);
    CHECK_FALSE(trace.shrank());
    // Another program cuts it down to its header: the ring, the live table and the rest are gone. Before,
    // the first read of them killed the reader with SIGBUS.
    REQUIRE(::truncate(path.c_str(), format::kHeaderBytes) == 0);
    CHECK(trace.events().events.empty());
    CHECK(trace.shrank());
    // A trace opened afterwards is merely short, as a torn file is.
    const TraceReader reopened = TraceReader::open(path);
    CHECK_FALSE(reopened.shrank());
}

TEST_CASE("a SIGBUS that is no read of a mapped trace ends the process as before") {
    const TempDir dir;
    const std::string path = write_file(dir, "trace.bin", full_trace().bytes());
    const TraceReader trace = TraceReader::open(path); // the handler is installed by now
    const std::string other = write_file(dir, "other.bin", std::vector<std::byte>(1 << 16));
    for (const bool fault : {false, true}) {
        const pid_t child = ::fork();
        REQUIRE(child >= 0);
        if (child == 0) {
            if (!fault)
                ::raise(SIGBUS);
            // A file of its own, mapped and cut shorter: its read faults outside every trace.
            const int fd = ::open(other.c_str(), O_RDWR);
            auto* bytes =
                static_cast<volatile const char*>(::mmap(nullptr, 1 << 16, PROT_READ, MAP_SHARED, fd, 0));
            if (fd < 0 || ::ftruncate(fd, 0) != 0)
                ::_exit(3);
            const char read = bytes[1 << 15];
            ::_exit(read == 0 ? 4 : 5);
        }
        int status = 0;
        REQUIRE(::waitpid(child, &status, 0) == child);
#if defined(__SANITIZE_ADDRESS__)
        // AddressSanitizer's handler, there before the reader's, reports the signal and exits with 1.
        CHECK((WIFEXITED(status) && WEXITSTATUS(status) == 1));
#else
        CHECK(WIFSIGNALED(status));
        CHECK(WTERMSIG(status) == SIGBUS);
#endif
    }
}

TEST_CASE("end states") {
    TraceBuilder builder;
    SECTION("no end record reads as running") {
        CHECK(parse(builder.bytes()).header().end.state == format::EndState::Running);
    }
    SECTION("signaled") {
        builder.end_signaled(11, 5);
        const auto end = parse(builder.bytes()).header().end;
        CHECK(end.state == format::EndState::Signaled);
        CHECK(end.signal == 11);
    }
    SECTION("end fields without the commit word are not trusted") {
        builder.end_exited(1, 5);
        builder.header().end_commit = 0;
        CHECK(parse(builder.bytes()).header().end.state == format::EndState::Running);
    }
    SECTION("a corrupt end record reads as running, with a warning") {
        builder.end_exited(1, 5);
        builder.header().end_state = 9;
        const TraceReader trace = parse(builder.bytes());
        CHECK(trace.header().end.state == format::EndState::Running);
        CHECK(has_warning(trace, "unknown state 9"));
    }
}

TEST_CASE("the process's target is read once committed, and a corrupt one is left out") {
    TraceBuilder builder;
    format::ProcessTarget& raw = builder.header().target;
    std::memcpy(raw.filename, "work.py", 8);
    std::memcpy(raw.qualname, "crunch", 7);
    raw.filename_bytes = 7;
    raw.qualname_bytes = 6;
    raw.first_line = 12;
    raw.dataloader_worker_id = -1;
    SECTION("not committed: not read") {
        CHECK_FALSE(parse(builder.bytes()).header().target);
    }
    SECTION("committed") {
        raw.commit = format::kTargetCommit;
        const std::optional<gpuleak::analyzer::ProcessTarget> target = parse(builder.bytes()).header().target;
        REQUIRE(target);
        CHECK(target->filename == "work.py");
        CHECK(target->qualname == "crunch");
        CHECK(target->first_line == 12);
        CHECK_FALSE(target->dataloader_worker_id);
    }
    SECTION("a length past its field or a torn commit word: a warning, no target") {
        raw.commit = format::kTargetCommit;
        raw.qualname_bytes = sizeof raw.qualname;
        const TraceReader long_name = parse(builder.bytes());
        CHECK_FALSE(long_name.header().target);
        CHECK(has_warning(long_name, "target record is corrupt"));
        raw.qualname_bytes = 6;
        raw.commit = 0x1234;
        const TraceReader torn = parse(builder.bytes());
        CHECK_FALSE(torn.header().target);
        CHECK(has_warning(torn, "target record is corrupt"));
    }
}

TEST_CASE("a wrapped ring keeps the last capacity events in order") {
    TraceBuilder builder;
    for (uint64_t i = 0; i < 21; ++i)
        builder.append_event(event(format::EventType::Alloc, 0x1000 + i, i));
    const TraceReader trace = parse(builder.bytes());
    const auto& events = trace.events();
    CHECK(events.dropped == 13);
    CHECK(events.torn == 0);
    CHECK(addresses(events.events) ==
          std::vector<uint64_t>{0x100d, 0x100e, 0x100f, 0x1010, 0x1011, 0x1012, 0x1013, 0x1014});
    CHECK(events.events.front().sequence == 13);
    CHECK(events.events.back().sequence == 20);
    CHECK(trace.warnings().empty());
}

TEST_CASE("a ring without slots drops every event") {
    TraceLayout layout;
    layout.ring_capacity = 0;
    TraceBuilder builder(layout);
    builder.header().ring_head = 5;
    const TraceReader trace = parse(builder.bytes());
    CHECK(trace.events().events.empty());
    CHECK(trace.events().dropped == 5);
    CHECK(trace.events().torn == 0);
}

// The header may promise fewer slots than its region holds; the slots past the capacity are not the
// ring's, however much their contents look like events of the window.
TEST_CASE("a ring reads only the slots of its capacity") {
    TraceBuilder builder; // a ring region of 8 slots
    const auto slot_offset = [&builder](uint64_t slot) {
        return builder.header().ring.offset + slot * sizeof(format::EventRecord);
    };
    for (uint64_t sequence = 3; sequence < 7; ++sequence) { // events 3..6 of a 4-slot ring: slots 3, 0, 1, 2
        format::EventRecord record = event(format::EventType::Alloc, 0x1000 + sequence, sequence);
        record.commit = sequence + 1;
        builder.put(slot_offset(sequence % 4), record);
    }
    for (uint64_t slot = 4; slot < 8; ++slot) {
        format::EventRecord record = event(format::EventType::Alloc, 0xbad, slot);
        record.commit = slot + 1;
        builder.put(slot_offset(slot), record);
    }
    builder.header().ring_capacity = 4;
    builder.header().ring_head = 7;
    const TraceReader trace = parse(builder.bytes());
    CHECK(addresses(trace.events().events) == std::vector<uint64_t>{0x1003, 0x1004, 0x1005, 0x1006});
    CHECK(trace.events().dropped == 3);
    CHECK(trace.events().torn == 0);
    CHECK(trace.warnings().empty());
}

TEST_CASE("torn events are skipped and counted apart from overwritten ones") {
    TraceBuilder builder;
    std::vector<uint64_t> offsets;
    for (uint64_t i = 0; i < 12; ++i)
        offsets.push_back(builder.append_event(event(format::EventType::Alloc, 0x1000 + i, i)));
    builder.put<uint64_t>(offsets[6], 0);         // in flight: commit not yet stored
    builder.put<uint64_t>(offsets[9], 9 + 1 - 8); // stale: the slot still holds the event it replaced
    format::EventRecord bad_type = event(format::EventType::Alloc, 0x1000 + 10, 10);
    bad_type.type = 99;
    bad_type.commit = 11;
    builder.put(offsets[10], bad_type);
    const TraceReader trace = parse(builder.bytes());
    const auto& events = trace.events();
    CHECK(events.dropped == 4);
    CHECK(events.torn == 3);
    CHECK(addresses(events.events) == std::vector<uint64_t>{0x1004, 0x1005, 0x1007, 0x1008, 0x100b});
    CHECK(has_warning(trace, "ring: 3 of the last 8 events"));
}

TEST_CASE("append-only streams") {
    TraceBuilder builder;
    builder.add_stack(1, {1, 2, 3});
    const uint64_t second = builder.add_stack(2, {4});
    SECTION("a torn record at the tail stops the walk with a warning") {
        builder.put<uint32_t>(second, 0);
        const TraceReader trace = parse(builder.bytes());
        CHECK(trace.stacks().size() == 1);
        CHECK(has_warning(trace, "stream 'stacks': header says 64 bytes written, the first 40 are valid"));
    }
    SECTION("a record inconsistent with its length stops the walk") {
        builder.put<uint16_t>(second + 12, 500);
        const TraceReader trace = parse(builder.bytes());
        CHECK(trace.stacks().size() == 1);
        CHECK(has_warning(trace, "malformed record at offset 40 (size does not match its frame count)"));
    }
    SECTION("a record running past its region stops the walk") {
        builder.put(second, format::RecordPrefix{format::kRecordCommit, 1u << 20});
        CHECK(has_warning(parse(builder.bytes()), "runs past the end of its region"));
    }
    SECTION("duplicate ids are rejected") {
        builder.add_stack(1, {9});
        const TraceReader trace = parse(builder.bytes());
        CHECK(trace.stacks().at(1) == std::vector<uint64_t>{1, 2, 3});
        CHECK(has_warning(trace, "duplicate id"));
    }
    SECTION("strings and modules must be NUL-terminated") {
        const uint64_t string = builder.add_string(1, "abc");
        builder.put<char>(string + sizeof(format::StringRecord) + 3, 'x');
        const uint64_t module = builder.add_module("/lib/x.so", {}, 0, 0, 0);
        builder.put<char>(module + sizeof(format::ModuleRecord) + 9, 'x');
        const TraceReader trace = parse(builder.bytes());
        CHECK(trace.strings().empty());
        CHECK(trace.modules().empty());
        CHECK(has_warning(trace, "string not terminated"));
        CHECK(has_warning(trace, "path not terminated"));
    }
}

TEST_CASE("only well-formed live slots are live") {
    TraceBuilder builder;
    builder.set_live(0, live_slot(0x1000, 1, format::MemoryKind::Device, 0));
    format::LiveSlot freed = live_slot(0x2000, 1, format::MemoryKind::Device, 0);
    freed.state = format::kSlotFree;
    builder.set_live(1, freed);
    format::LiveSlot garbage_state = live_slot(0x3000, 1, format::MemoryKind::Device, 0);
    garbage_state.state = 12345;
    builder.set_live(2, garbage_state);
    builder.set_live(3, live_slot(0x4000, 1, static_cast<format::MemoryKind>(format::kKindCount), 0));
    builder.set_live(4, live_slot(0x5000, 1, format::MemoryKind::None, 0));
    builder.set_live(5, live_slot(0x6000, 1, format::MemoryKind::Device, -3));
    builder.set_live(15, live_slot(0x7000, 1, format::MemoryKind::VmmMapping, 20));
    const TraceReader trace = parse(builder.bytes());
    const auto& live = trace.live_allocations();
    REQUIRE(live.allocations.size() == 2);
    CHECK(live.allocations[0].address == 0x1000);
    CHECK(live.allocations[1].address == 0x7000);
    CHECK(live.invalid_slots == 4);
    CHECK(has_warning(trace, "live table: 4 slots"));
}

namespace {

// Four slots per stripe, so that a stripe can have slots past its mark (the default 16 slots leave most
// stripes without any).
TraceLayout four_slots_per_stripe() {
    TraceLayout layout;
    layout.live_capacity = 4 * format::kLiveStripes;
    return layout;
}

} // namespace

TEST_CASE("live slots are read only up to their stripe's mark") {
    TraceBuilder builder(four_slots_per_stripe());
    builder.set_live(0, live_slot(0x1000, 1, format::MemoryKind::Device, 0));
    builder.set_live(2, live_slot(0x2000, 1, format::MemoryKind::Device, 0));
    builder.set_live(4 * 7 + 3, live_slot(0x3000, 1, format::MemoryKind::Device, 0));
    builder.set_live(4 * 9 + 1, live_slot(0x4000, 1, format::MemoryKind::Device, 0));
    CHECK(builder.live_mark(0) == 3);
    CHECK(builder.live_mark(7) == 4);
    CHECK(builder.live_mark(9) == 2);
    // Past the marks: slot 2 of stripe 0, all of stripe 9. The writer never leaves a live slot there, so
    // whatever is there was never live.
    builder.set_live_mark(0, 2);
    builder.set_live_mark(9, 0);
    const TraceReader trace = parse(builder.bytes());
    std::vector<uint64_t> live;
    for (const auto& allocation : trace.live_allocations().allocations)
        live.push_back(allocation.address);
    CHECK(live == std::vector<uint64_t>{0x1000, 0x3000});
    CHECK(trace.live_allocations().invalid_slots == 0);
    CHECK(trace.warnings().empty());
}

TEST_CASE("a mark beyond its stripe is corrupt and costs a warning and the whole stripe is read") {
    TraceBuilder builder(four_slots_per_stripe());
    builder.set_live(4 * 5 + 3, live_slot(0x5000, 1, format::MemoryKind::Device, 0));
    builder.set_live(4 * 6, live_slot(0x6000, 1, format::MemoryKind::Device, 0));
    builder.set_live_mark(5, 1);
    builder.set_live_mark(6, ~uint64_t{0});
    builder.set_live_mark(63, 5);
    const TraceReader trace = parse(builder.bytes());
    std::vector<uint64_t> live;
    for (const auto& allocation : trace.live_allocations().allocations)
        live.push_back(allocation.address);
    CHECK(live == std::vector<uint64_t>{0x6000});
    CHECK(
        has_warning(trace, "live table: stripe 6 has 4 slots, its mark says 18446744073709551615 were used"));
    CHECK(has_warning(trace, "live table: stripe 63 has 4 slots, its mark says 5 were used"));
}

TEST_CASE("stripes follow the capacity and hold every slot once") {
    for (const uint64_t capacity : {uint64_t{0}, uint64_t{1}, uint64_t{63}, uint64_t{64}, uint64_t{1000},
                                    uint64_t{17476}, ~uint64_t{0} / 48}) {
        CAPTURE(capacity);
        CHECK(format::live_stripe_start(capacity, 0) == 0);
        CHECK(format::live_stripe_start(capacity, format::kLiveStripes) == capacity);
        for (uint32_t stripe = 0; stripe < format::kLiveStripes; ++stripe) {
            const uint64_t slots =
                format::live_stripe_start(capacity, stripe + 1) - format::live_stripe_start(capacity, stripe);
            CHECK(slots >= capacity / format::kLiveStripes);
            CHECK(slots <= capacity / format::kLiveStripes + 1);
            if (capacity < (uint64_t{1} << 32))
                CHECK(format::live_stripe_start(capacity, stripe) ==
                      capacity * stripe / format::kLiveStripes);
        }
    }
}

TEST_CASE("a trace cut inside its stripe marks has no live slots") {
    TraceBuilder builder;
    builder.set_live(3, live_slot(0xa000, 8192, format::MemoryKind::Device, 0));
    std::vector<std::byte> bytes = builder.bytes();
    bytes.resize(builder.header().live.offset + 100);
    const TraceReader trace = parse(bytes);
    CHECK(trace.live_allocations().allocations.empty());
    CHECK(has_warning(trace, "truncated: region 'live' has 100 of its"));
}

namespace {

format::SpillSite spill_site(uint32_t stack_id, format::MemoryKind kind, uint64_t count, uint64_t bytes) {
    format::SpillSite site{};
    site.stack_id = stack_id;
    site.kind = static_cast<uint8_t>(kind);
    site.device = 0;
    site.version = 3; // the tally in copy 1 is the whole one
    site.tally[1] = {count, bytes};
    site.tally[0] = {count + 1, bytes + 99}; // the copy a writer was filling
    site.bucket_shift = 4;                   // buckets of 16 events
    site.buckets[2] = {count, 100, 200};
    return site;
}

} // namespace

TEST_CASE("spilled allocations are read by site from the tally each record's version names") {
    TraceBuilder builder;
    format::SpillSite unattributed = spill_site(0, format::MemoryKind::None, 2, 1024);
    unattributed.device = -2;
    builder.set_spill(0, unattributed);
    builder.set_spill(1, spill_site(7, format::MemoryKind::Block, 5, 2560));
    builder.set_spill(2, spill_site(8, format::MemoryKind::Block, 0, 0)); // all freed since
    const TraceReader trace = parse(builder.bytes());
    CHECK(trace.warnings().empty());
    const auto& spilled = trace.live_allocations().spilled;
    REQUIRE(spilled.size() == 2);
    CHECK(spilled[0].kind == format::MemoryKind::None);
    CHECK(spilled[0].count == 2);
    CHECK(spilled[1].stack_id == 7);
    CHECK(spilled[1].kind == format::MemoryKind::Block);
    CHECK(spilled[1].count == 5);
    CHECK(spilled[1].bytes == 2560);
    REQUIRE(spilled[1].stretches.size() == 1);
    const auto& stretch = spilled[1].stretches[0];
    CHECK(stretch.first_sequence == 32);
    CHECK(stretch.end_sequence == 48);
    CHECK(stretch.count == 5);
    CHECK(stretch.first_time_ns == 100);
    CHECK(stretch.last_time_ns == 200);
}

TEST_CASE("spill records in flight, malformed or past the region cost a warning, never the trace") {
    TraceBuilder builder;
    builder.set_spill(0, spill_site(0, format::MemoryKind::None, 1, 8));
    format::SpillSite torn = spill_site(3, format::MemoryKind::Block, 1, 8);
    torn.commit = 1;
    builder.set_spill(1, torn);
    builder.set_spill(2, spill_site(4, static_cast<format::MemoryKind>(200), 1, 8));
    builder.set_spill(3, spill_site(5, format::MemoryKind::Block, 1, 8));
    builder.header().spill_used = 1000;
    const TraceReader trace = parse(builder.bytes());
    REQUIRE(trace.live_allocations().spilled.size() == 2);
    CHECK(trace.live_allocations().spilled[1].stack_id == 5);
    CHECK(has_warning(trace, "spill region: 2 records in flight or malformed, ignored"));
    CHECK(has_warning(trace, "spill region: header says 1000 records are used, it has room for 4"));
}

TEST_CASE("notable events beyond capacity are dropped and torn ones counted") {
    TraceBuilder builder;
    for (uint64_t i = 0; i < 6; ++i)
        builder.add_notable(event(format::EventType::Marker, i + 1, i));
    builder.put<uint64_t>(builder.header().notable.offset + 2 * sizeof(format::EventRecord), 0);
    const TraceReader trace = parse(builder.bytes());
    const auto& notable = trace.notable_events();
    CHECK(notable.dropped == 2);
    CHECK(notable.torn == 1);
    CHECK(addresses(notable.events) == std::vector<uint64_t>{1, 2, 4});
    CHECK(has_warning(trace, "notable events: the array was full: the last 2 were not kept"));
}

TEST_CASE("the timeline is committed samples in time order and each once") {
    TraceBuilder builder;
    const auto sample = [](uint64_t commit, uint64_t time_ns) {
        format::TimelineSample s{};
        s.commit = commit;
        s.time_ns = time_ns;
        return s;
    };
    builder.set_timeline(0, sample(1, 100));
    builder.set_timeline(1, sample(9, 900));
    builder.set_timeline(2, sample(5, 500));
    builder.set_timeline(3, sample(9, 900)); // mid-thinning copy
    builder.set_timeline(4, sample(0, 50));  // never committed
    builder.set_timeline(7, sample(3, 300));
    const TraceReader trace = parse(builder.bytes());
    const auto& timeline = trace.timeline();
    std::vector<uint64_t> times;
    for (const auto& s : timeline)
        times.push_back(s.time_ns);
    CHECK(times == std::vector<uint64_t>{100, 300, 500, 900});
    CHECK(timeline[3].sample == 8);
}

TEST_CASE("a truncated trace is an error or a trace with warnings") {
    const std::vector<std::byte> whole = full_trace().bytes();
    for (std::size_t sixteenth = 0; sixteenth < 16; ++sixteenth) {
        const std::size_t size = whole.size() * sixteenth / 16;
        CAPTURE(size);
        const std::vector<std::byte> cut(whole.begin(), whole.begin() + static_cast<std::ptrdiff_t>(size));
        if (size < format::kHeaderBytes) {
            CHECK_THROWS_AS(parse(cut), TraceError);
            parse_without_crash(cut);
            continue;
        }
        const TraceReader trace = parse(cut);
        CHECK(has_warning(trace, "truncated: header says"));
    }
    const std::vector<std::byte> header_only(whole.begin(), whole.begin() + 4096);
    CHECK_THROWS_WITH(parse(header_only),
                      fmt::format("trace.bin: truncated: header says {} bytes, file has 4096", whole.size()));
}

TEST_CASE("a trace cut inside its ring keeps the slots that are present") {
    TraceBuilder builder;
    for (uint64_t i = 0; i < 8; ++i)
        builder.append_event(event(format::EventType::Alloc, i, i));
    std::vector<std::byte> bytes = builder.bytes();
    bytes.resize(builder.header().ring.offset + 3 * sizeof(format::EventRecord));
    const TraceReader trace = parse(bytes);
    CHECK(addresses(trace.events().events) == std::vector<uint64_t>{0, 1, 2});
    CHECK(trace.events().torn == 5);
    CHECK(has_warning(trace, "truncated: region 'ring' has 192 of its 512 bytes"));
    CHECK(has_warning(trace, "truncated: region 'timeline' has 0 of its"));
}

TEST_CASE("a header promising a huge file costs no more than the bytes present") {
    TraceBuilder builder;
    format::FileHeader& header = builder.header();
    header.file_bytes = uint64_t{1} << 62;
    header.timeline = {uint64_t{1} << 61, uint64_t{1} << 60}; // after every other region
    header.ring = {uint64_t{1} << 60, uint64_t{1} << 59};
    header.ring_capacity = header.ring.size / sizeof(format::EventRecord);
    header.ring_head = ~uint64_t{0};
    header.notable = {uint64_t{1} << 58, uint64_t{1} << 58};
    header.notable_capacity = header.notable.size / sizeof(format::EventRecord);
    header.notable_count = ~uint64_t{0};
    header.timeline_capacity = header.timeline.size / sizeof(format::TimelineSample);
    const TraceReader trace = parse(builder.bytes());
    CHECK(trace.events().torn == header.ring_capacity);
    CHECK(trace.notable_events().torn == header.notable_capacity);
    CHECK(has_warning(trace, "truncated: region 'ring' has 0 of its"));
}

TEST_CASE("single-byte corruption never crashes") {
    const std::vector<std::byte> whole = full_trace().bytes();
    for (const std::byte value : {std::byte{0xff}, std::byte{0x00}, std::byte{0x80}}) {
        for (std::size_t offset = 0; offset < whole.size(); offset += 97) {
            std::vector<std::byte> bytes = whole;
            bytes[offset] = value;
            parse_without_crash(bytes);
        }
    }
}

TEST_CASE("every header field set to extreme values never crashes") {
    const std::vector<std::byte> whole = full_trace().bytes();
    for (const uint32_t value : {0xffffffffu, 0x80000000u, 0x00000001u, 0x00000040u, 0x7fffffc0u}) {
        for (std::size_t offset = 0; offset < sizeof(format::FileHeader); offset += 4) {
            std::vector<std::byte> bytes = whole;
            std::memcpy(bytes.data() + offset, &value, sizeof(value));
            parse_without_crash(bytes);
        }
    }
}

TEST_CASE("random mutations never crash") {
    const std::vector<std::byte> whole = full_trace().bytes();
    std::mt19937_64 random(20240531);
    std::uniform_int_distribution<std::size_t> offset(0, whole.size() - 1);
    for (int round = 0; round < 2000; ++round) {
        std::vector<std::byte> bytes = whole;
        for (int i = 0; i < 8; ++i)
            bytes[offset(random)] = static_cast<std::byte>(random());
        parse_without_crash(bytes);
    }
}

TEST_CASE("files that are not traces get a one-line error") {
    const TempDir dir;
    SECTION("missing") {
        CHECK_THROWS_WITH(TraceReader::open(dir.path() + "/nope"),
                          Catch::EndsWith("nope: No such file or directory"));
    }
    SECTION("directory") {
        CHECK_THROWS_WITH(TraceReader::open(dir.path()), dir.path() + ": is a directory");
    }
    SECTION("empty") {
        const std::string path = write_file(dir, "empty.bin", {});
        CHECK_THROWS_WITH(TraceReader::open(path), path + ": empty file");
    }
    SECTION("random bytes") {
        std::vector<std::byte> bytes(10000);
        std::mt19937 random(7);
        for (std::byte& b : bytes)
            b = static_cast<std::byte>(random());
        const std::string path = write_file(dir, "random.bin", bytes);
        CHECK_THROWS_WITH(TraceReader::open(path), path + ": not a gpuleak trace (bad magic)");
    }
    SECTION("a few bytes of the magic") {
        std::vector<std::byte> bytes = full_trace().bytes();
        bytes.resize(5);
        CHECK_THROWS_WITH(parse(bytes), "trace.bin: not a gpuleak trace (bad magic)");
    }
}

TEST_CASE("header validation") {
    TraceBuilder builder;
    format::FileHeader& header = builder.header();
    std::string message;
    SECTION("future version") {
        header.format_version = format::kFormatVersion + 1;
        message = fmt::format("format version {} is newer than this reader ({})", format::kFormatVersion + 1,
                              format::kFormatVersion);
    }
    SECTION("version 6, whose live slots do not say where in the order of events they were made") {
        header.format_version = 6;
        message = "unsupported format version 6";
    }
    SECTION("version 1 whose live region has no marks") {
        header.format_version = 1;
        message = "unsupported format version 1";
    }
    SECTION("version 3 whose Python frames do not say which evaluation loop ran them") {
        header.format_version = 3;
        message = "unsupported format version 3";
    }
    SECTION("version 0") {
        header.format_version = 0;
        message = "unsupported format version 0";
    }
    SECTION("other byte order") {
        header.endian_tag = 0x04030201;
        message = "written with the other byte order";
    }
    SECTION("header size") {
        header.header_bytes = 4096;
        message = "corrupt header: header size 4096, expected 12288";
    }
    SECTION("file smaller than its header") {
        header.file_bytes = 100;
        message = "corrupt header: file size 100 is smaller than the header";
    }
    SECTION("region beyond file_bytes") {
        header.ring.offset = header.file_bytes;
        message = "region 'ring' lies outside the file";
    }
    SECTION("region size overflowing") {
        header.strings.size = ~uint64_t{0} - 63;
        message = "region 'strings' lies outside the file";
    }
    SECTION("misaligned region") {
        header.live.offset += 8;
        message = "region 'live' is not 64-byte aligned";
    }
    SECTION("region in the header") {
        header.modules.offset = 64;
        message = "region 'modules' overlaps the header";
    }
    SECTION("overlapping regions") {
        header.notable.offset = header.ring.offset + 64;
        message = "regions 'ring' and 'notable' overlap";
    }
    SECTION("capacity larger than its region") {
        header.ring_capacity = 9;
        message = "region 'ring' has room for 8 records, header says 9";
    }
    SECTION("huge capacity") {
        header.timeline_capacity = ~uint64_t{0};
        message = "region 'timeline' has room for 8 records";
    }
    SECTION("live region without room for its marks") {
        header.live.size = sizeof(format::LiveStripeMarks) - 64;
        message = "region 'live' has room for 0 records, header says 16";
    }
    SECTION("live slots that need the marks' room") {
        header.live_capacity = 16 + sizeof(format::LiveStripeMarks) / sizeof(format::LiveSlot);
        message = fmt::format("region 'live' has room for 16 records, header says {}", header.live_capacity);
    }
    CHECK_THROWS_WITH(parse(builder.bytes()), Catch::StartsWith("trace.bin: " + message));
}

TEST_CASE("header strings are bounded by their fields") {
    TraceBuilder builder;
    std::memset(builder.header().hostname, 'h', sizeof(builder.header().hostname));
    std::memset(builder.header().command_line, 'c', sizeof(builder.header().command_line));
    builder.header().command_line_bytes = 1u << 31;
    const TraceReader trace = parse(builder.bytes());
    CHECK(trace.header().hostname == std::string(64, 'h'));
    CHECK(trace.header().command_line ==
          std::vector<std::string>{std::string(format::kCommandLineBytes, 'c')});
    CHECK(has_warning(trace, "command line length 2147483648 exceeds its field"));
}
