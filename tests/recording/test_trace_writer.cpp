#include <catch2/catch.hpp>

#include <fcntl.h>
#include <fstream>
#include <sys/stat.h>
#include <unistd.h>
#include <vector>

#include "read/trace_reader.h"
#include "recording/trace_writer.h"
#include "scoped_environment.h"
#include "temp_dir.h"

using gpuleak::TraceWriter;
using gpuleak::analyzer::TraceReader;
using gpuleak::format::EventRecord;
using gpuleak::format::EventType;

namespace {

gpuleak::Config config_for(const std::string& pattern, uint64_t megabytes = gpuleak::kMinMaxMb) {
    gpuleak::Config config = gpuleak::read_config();
    std::snprintf(config.output_pattern, sizeof config.output_pattern, "%s", pattern.c_str());
    config.max_bytes = megabytes << 20;
    return config;
}

EventRecord alloc_event(uint64_t address) {
    EventRecord event{};
    event.type = static_cast<uint16_t>(EventType::Alloc);
    event.address = address;
    event.size = 1;
    event.kind = static_cast<uint8_t>(gpuleak::format::MemoryKind::Device);
    return event;
}

// How many of the pages of [begin, begin + bytes) of the writer's file are mapped into this process:
// present in its page tables (/proc/self/pagemap's bit 63), which is what spares a write its fault.
size_t mapped_pages(const TraceWriter& writer, uint64_t begin, uint64_t bytes) {
    const auto page = static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
    const auto first = reinterpret_cast<uint64_t>(writer.header()) + begin;
    std::vector<uint64_t> entries((bytes + page - 1) / page);
    const int pagemap = ::open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
    REQUIRE(pagemap >= 0);
    const auto wanted = static_cast<ssize_t>(entries.size() * sizeof(uint64_t));
    const ssize_t got =
        ::pread(pagemap, entries.data(), static_cast<size_t>(wanted), static_cast<off_t>(first / page * 8));
    ::close(pagemap);
    REQUIRE(got == wanted);
    size_t mapped = 0;
    for (uint64_t entry : entries)
        mapped += entry >> 63;
    return mapped;
}

} // namespace

TEST_CASE("the layout fits the size limit with aligned and disjoint regions") {
    for (uint64_t megabytes : {uint64_t{4}, uint64_t{64}, uint64_t{1000}}) {
        const gpuleak::Layout layout = gpuleak::compute_layout(megabytes << 20);
        CHECK(layout.file_bytes <= megabytes << 20);
        // In file order: what a host-only trace holds first, the live table last, as only its slots
        // are reserved on disk as they are used.
        const gpuleak::format::Region regions[] = {layout.timeline, layout.notable, layout.modules,
                                                   layout.strings,  layout.stacks,  layout.code,
                                                   layout.spill,    layout.ring,    layout.live};
        uint64_t end = gpuleak::format::kHeaderBytes;
        for (const auto& region : regions) {
            CHECK(region.offset % 64 == 0);
            CHECK(region.offset >= end);
            end = region.offset + region.size;
        }
        CHECK(end <= layout.file_bytes);
        CHECK((layout.ring_capacity & (layout.ring_capacity - 1)) == 0);
        CHECK(sizeof(gpuleak::format::LiveStripeMarks) +
                  layout.live_capacity * sizeof(gpuleak::format::LiveSlot) <=
              layout.live.size);
        CHECK(layout.spill_capacity * sizeof(gpuleak::format::SpillSite) <= layout.spill.size);
        CHECK(layout.reserved_bytes == layout.live.offset + sizeof(gpuleak::format::LiveStripeMarks));
        CHECK(layout.host_only_bytes == layout.notable.offset + layout.notable.size);
    }
    // The default holds a few million live allocations one by one, and reserves about 64 MiB at the
    // start; a process that never uses CUDA (a DataLoader worker) takes a few MiB.
    const gpuleak::Layout defaults = gpuleak::compute_layout(gpuleak::kDefaultMaxMb << 20);
    CHECK(defaults.live_capacity >= 3'000'000);
    CHECK(defaults.reserved_bytes <= uint64_t{65} << 20);
    CHECK(defaults.host_only_bytes <= uint64_t{3} << 20);
}

TEST_CASE("the largest trace's live table fits the live table's slot indices") {
    // LiveTable::attach refuses a larger table rather than use other stripes than the file's.
    CHECK(gpuleak::compute_layout(gpuleak::kMaxMaxMb << 20).live_capacity <= UINT32_MAX / 4);
}

TEST_CASE("trace files are private and never overwritten and name the pid") {
    TempDir dir;
    TraceWriter first;
    REQUIRE(first.create(config_for(dir.path() + "/run.%p.trace"), {4242, 1, ""}));
    CHECK(std::string(first.path()) == dir.path() + "/run.4242.trace");
    struct stat info {};
    REQUIRE(stat(first.path(), &info) == 0);
    CHECK((info.st_mode & 0777) == 0600);

    TraceWriter second;
    REQUIRE(second.create(config_for(dir.path() + "/run.%p.trace"), {4242, 1, ""}));
    CHECK(std::string(second.path()) == dir.path() + "/run.4242.trace.1");
}

TEST_CASE("an unwritable place gives a warning and no trace and no crash") {
    TraceWriter writer;
    CHECK_FALSE(writer.create(config_for("/proc/gpuleak-cannot-write-here/t.trace"), {1, 0, ""}));
    CHECK_FALSE(writer.mapped());
}

TEST_CASE("the ring keeps the newest events and counts what it overwrote") {
    TempDir dir;
    TraceWriter writer;
    REQUIRE(writer.create(config_for(dir.path() + "/t.trace"), {1, 0, ""}));
    const uint64_t capacity = writer.header()->ring_capacity;
    const uint64_t total = capacity * 2 + 17;
    for (uint64_t i = 0; i < total; ++i) {
        EventRecord event = alloc_event(i);
        writer.append_event(event);
    }
    TraceReader reader = TraceReader::open(writer.path());
    const auto& log = reader.events();
    REQUIRE(log.events.size() == capacity);
    CHECK(log.dropped == total - capacity);
    CHECK(log.torn == 0);
    CHECK(log.events.front().address == total - capacity);
    CHECK(log.events.back().address == total - 1);
    for (size_t i = 1; i < log.events.size(); ++i)
        REQUIRE(log.events[i].sequence == log.events[i - 1].sequence + 1);
}

TEST_CASE("the ring's pages ahead of the newest event are made present before events reach them") {
    TempDir dir;
    TraceWriter writer;
    REQUIRE(writer.create(config_for(dir.path() + "/t.trace", 256), {1, 0, ""}));
    const gpuleak::format::Region ring = writer.header()->ring;
    const auto page = static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
    constexpr uint64_t kAhead = 4 << 20;
    REQUIRE(ring.size > 3 * kAhead);
    // Whole pages only: the ring need not start on one.
    const uint64_t first_page = (ring.offset + page - 1) / page * page;
    const uint64_t whole = kAhead - page;
    // A file just mapped has no page of the ring in the page tables yet.
    CHECK(mapped_pages(writer, first_page, whole) == 0);
    writer.prepare_ring_ahead();
    CHECK(mapped_pages(writer, first_page, whole) == whole / page);
    CHECK(mapped_pages(writer, first_page + 2 * kAhead, whole) == 0);
    // As the head moves on, so does what is made present.
    for (uint64_t i = 0; i < 2 * kAhead / sizeof(EventRecord); ++i) {
        EventRecord event = alloc_event(i);
        writer.append_event(event);
    }
    writer.prepare_ring_ahead();
    CHECK(mapped_pages(writer, first_page + 2 * kAhead, whole) == whole / page);
}

TEST_CASE("notable events survive the ring and overflow is counted") {
    TempDir dir;
    TraceWriter writer;
    REQUIRE(writer.create(config_for(dir.path() + "/t.trace"), {1, 0, ""}));
    const uint64_t capacity = writer.header()->notable_capacity;
    uint64_t kept = 0;
    for (uint64_t i = 0; i < capacity + 5; ++i) {
        EventRecord event = alloc_event(i);
        event.type = static_cast<uint16_t>(EventType::AllocFailed);
        if (writer.append_notable(event))
            ++kept;
    }
    CHECK(kept == capacity);
    TraceReader reader = TraceReader::open(writer.path());
    CHECK(reader.notable_events().events.size() == capacity);
    CHECK(reader.notable_events().dropped == 5);
}

TEST_CASE("strings and the end record read back") {
    TempDir dir;
    TraceWriter writer;
    REQUIRE(writer.create(config_for(dir.path() + "/t.trace"), {77, 7, "/parent.trace"}));
    uint32_t id = writer.add_string("epoch 3", 7);
    CHECK(id == 1);
    CHECK(writer.add_string("epoch 4", 7) == 2);
    writer.write_end(gpuleak::format::EndState::Exited, 3);
    TraceReader reader = TraceReader::open(writer.path());
    CHECK(reader.strings().at(1) == "epoch 3");
    CHECK(reader.strings().at(2) == "epoch 4");
    CHECK(reader.header().pid == 77);
    CHECK(reader.header().ppid == 7);
    CHECK(reader.header().parent_trace == "/parent.trace");
    CHECK(reader.header().end.state == gpuleak::format::EndState::Exited);
    CHECK(reader.header().end.exit_code == 3);
    CHECK(reader.warnings().empty());
}

TEST_CASE("a host-only trace holds the header, the timeline and the notable array until it is promoted") {
    TempDir dir;
    TraceWriter writer;
    const gpuleak::ProcessIdentity identity{4244, 1, "/parent.trace"};
    // A torchrun worker's environment, and the Slurm task torchrun runs as on its machine.
    const gpuleak::test::ScopedEnvironment job{{"RANK", "3"},
                                               {"LOCAL_RANK", nullptr},
                                               {"WORLD_SIZE", "8"},
                                               {"GROUP_RANK", "1"},
                                               {"SLURM_NODEID", "5"},
                                               {"SLURM_PROCID", "1"},
                                               {"SLURM_LOCALID", "0"},
                                               {"SLURM_NTASKS", "2"},
                                               {"SLURM_JOB_ID", "81234"},
                                               {"TORCHELASTIC_RUN_ID", "none"}};
    REQUIRE(writer.create(config_for(dir.path() + "/t.trace", 64), identity, true));
    const gpuleak::Layout layout = gpuleak::compute_layout(uint64_t{64} << 20);
    struct stat info {};
    REQUIRE(stat(writer.path(), &info) == 0);
    CHECK(static_cast<uint64_t>(info.st_size) == layout.host_only_bytes);
    CHECK(writer.host_only());
    EventRecord fork_event{};
    fork_event.type = static_cast<uint16_t>(EventType::Fork);
    fork_event.address = 4245;
    REQUIRE(writer.append_notable(fork_event));
    {
        TraceReader reader = TraceReader::open(writer.path());
        CHECK(reader.header().host_only());
        CHECK(reader.header().rank == 3);
        CHECK(reader.header().local_rank == -1);
        CHECK(reader.header().world_size == 8);
        CHECK(reader.header().node_rank == 1);
        CHECK(reader.header().slurm_task == 1);
        CHECK(reader.header().slurm_local_task == 0);
        CHECK(reader.header().slurm_tasks == 2);
        CHECK(reader.header().job == "81234");
        CHECK(reader.notable_events().events.size() == 1);
        CHECK(reader.events().events.empty());
        CHECK(reader.warnings().empty());
    }
    REQUIRE(writer.promote() == 0);
    CHECK_FALSE(writer.host_only());
    REQUIRE(stat(writer.path(), &info) == 0);
    CHECK(static_cast<uint64_t>(info.st_size) == layout.file_bytes);
    EventRecord event = alloc_event(0x1000);
    writer.append_event(event);
    TraceReader reader = TraceReader::open(writer.path());
    CHECK_FALSE(reader.header().host_only());
    CHECK(reader.notable_events().events.size() == 1);
    REQUIRE(reader.events().events.size() == 1);
    CHECK(reader.events().events[0].address == 0x1000);
    CHECK(reader.warnings().empty());
}

TEST_CASE("a host-only trace goes at an exec and comes back, with what it held, when the exec fails") {
    TempDir dir;
    TraceWriter writer;
    REQUIRE(writer.create(config_for(dir.path() + "/t.trace"), {4246, 1, ""}, true));
    const std::string path = writer.path();
    EventRecord marker{};
    marker.type = static_cast<uint16_t>(EventType::Marker);
    REQUIRE(writer.append_notable(marker));
    writer.remove_for_exec();
    CHECK(::access(path.c_str(), F_OK) != 0);
    REQUIRE(writer.restore_after_failed_exec());
    REQUIRE(::access(path.c_str(), F_OK) == 0);
    // What is written after the failed exec reaches the file made again.
    REQUIRE(writer.append_notable(marker));
    TraceReader reader = TraceReader::open(path);
    CHECK(reader.header().pid == 4246);
    CHECK(reader.notable_events().events.size() == 2);

    // Made whole after all (the process used CUDA after its exec failed): the rest of the mapping is
    // the new file's too.
    REQUIRE(writer.promote() == 0);
    EventRecord event = alloc_event(0x2000);
    writer.append_event(event);
    TraceReader whole_reader = TraceReader::open(path);
    REQUIRE(whole_reader.events().events.size() == 1);
    CHECK(whole_reader.notable_events().events.size() == 2);

    // A whole trace stays: its end record says exec.
    TraceWriter whole;
    REQUIRE(whole.create(config_for(dir.path() + "/w.trace"), {4247, 1, ""}));
    whole.remove_for_exec();
    CHECK(::access(whole.path(), F_OK) == 0);
}

TEST_CASE("a host-only trace is made again at a failed exec only in the directory it was made in") {
    TempDir dir;
    const std::string traces = dir.path() + "/traces";
    REQUIRE(::mkdir(traces.c_str(), 0700) == 0);
    TraceWriter writer;
    REQUIRE(writer.create(config_for(traces + "/t.trace"), {4248, 1, ""}, true));
    const std::string path = writer.path();
    writer.remove_for_exec();
    REQUIRE(::access(path.c_str(), F_OK) != 0);
    // Another directory in its place by the time the exec failed (one above it was another user's).
    REQUIRE(::rename(traces.c_str(), (dir.path() + "/moved").c_str()) == 0);
    REQUIRE(::mkdir(traces.c_str(), 0700) == 0);
    CHECK_FALSE(writer.restore_after_failed_exec());
    CHECK(::access(path.c_str(), F_OK) != 0);
    CHECK(::access((dir.path() + "/moved/t.trace").c_str(), F_OK) != 0);
    CHECK_FALSE(writer.mapped());
}
