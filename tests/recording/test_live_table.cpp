#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <optional>
#include <random>
#include <set>
#include <sys/stat.h>
#include <thread>
#include <vector>

#include "read/trace_reader.h"
#include "recording/live_table.h"
#include "recording/trace_writer.h"
#include "temp_dir.h"

using gpuleak::LiveTable;
using gpuleak::SpillSites;
using gpuleak::format::KeySpace;
using gpuleak::format::LiveSlot;
using gpuleak::format::LiveStripeMarks;
using gpuleak::format::MemoryKind;

namespace {

// The live region of a trace file in memory: the stripes' marks, then the slots.
struct LiveRegion {
    explicit LiveRegion(uint64_t capacity) : slots(capacity) {}
    bool attach_to(LiveTable& table) { return table.attach(&marks, slots.data(), slots.size()); }

    LiveStripeMarks marks{};
    std::vector<LiveSlot> slots;
};

// Every live slot lies below its stripe's mark, no mark passes its stripe, and nothing past a mark was
// ever written: what a reader that stops at the marks needs to find the whole live set.
bool marks_cover_the_table(const LiveRegion& region) {
    const uint64_t capacity = region.slots.size();
    for (uint32_t stripe = 0; stripe < gpuleak::format::kLiveStripes; ++stripe) {
        const uint64_t first = gpuleak::format::live_stripe_start(capacity, stripe);
        const uint64_t end = gpuleak::format::live_stripe_start(capacity, stripe + 1);
        const uint64_t used = region.marks.used[stripe];
        if (used > end - first)
            return false;
        static const LiveSlot untouched{};
        for (uint64_t slot = first + used; slot < end; ++slot)
            if (std::memcmp(&region.slots[slot], &untouched, sizeof(LiveSlot)) != 0)
                return false;
    }
    return true;
}

uint64_t marks_total(const LiveStripeMarks& marks) {
    uint64_t total = 0;
    for (const uint64_t used : marks.used)
        total += used;
    return total;
}

LiveSlot slot_of(uint64_t address, uint64_t size, MemoryKind kind = MemoryKind::Device) {
    LiveSlot slot{};
    slot.address = address;
    slot.size = size;
    slot.kind = static_cast<uint8_t>(kind);
    slot.device = 0;
    return slot;
}

// The spill region of a trace file in memory, with the SpillSites that count in it.
struct SpillRegion {
    explicit SpillRegion(size_t capacity) : records(capacity) {}
    bool attach() { return spill.attach(records.data(), records.size(), &used); }
    // The whole tallies of the records of `stack_id`, or of every record.
    [[nodiscard]] gpuleak::format::SpillTally tally(std::optional<uint32_t> stack_id = std::nullopt) const {
        gpuleak::format::SpillTally total{};
        for (uint64_t r = 0; r < used; ++r)
            if (!stack_id || records[r].stack_id == *stack_id) {
                total.count += records[r].tally[records[r].version % 2].count;
                total.bytes += records[r].tally[records[r].version % 2].bytes;
            }
        return total;
    }

    std::vector<gpuleak::format::SpillSite> records;
    uint64_t used = 0;
    SpillSites spill;
};

// Kept in the table (in a file slot or in private memory), replacing nothing.
bool added(LiveTable::InsertResult result) {
    return !result.untracked && !result.replaced;
}

// What a reader after a crash would see: the file slots marked live.
std::set<uint64_t> live_in_file(const std::vector<LiveSlot>& slots) {
    std::set<uint64_t> live;
    for (const LiveSlot& slot : slots)
        if (slot.state == gpuleak::format::kSlotLive)
            live.insert(slot.address);
    return live;
}

} // namespace

TEST_CASE("the live table's file slots always hold exactly the live set") {
    LiveRegion region(4096);
    LiveTable table;
    REQUIRE(region.attach_to(table));

    std::set<uint64_t> expected;
    for (uint64_t i = 1; i <= 1000; ++i) {
        REQUIRE(added(table.insert(slot_of(i * 512, i), nullptr)));
        expected.insert(i * 512);
    }
    for (uint64_t i = 1; i <= 1000; i += 3) {
        LiveSlot removed{};
        REQUIRE(table.remove(KeySpace::Pointer, i * 512, &removed));
        CHECK(removed.size == i);
        expected.erase(i * 512);
    }
    CHECK(live_in_file(region.slots) == expected);
    CHECK(table.live_count() == expected.size());

    LiveSlot found{};
    REQUIRE(table.find(KeySpace::Pointer, 2 * 512, &found));
    CHECK(found.size == 2);
    CHECK_FALSE(table.find(KeySpace::Pointer, 1 * 512, &found));
    CHECK_FALSE(table.remove(KeySpace::Pointer, 1 * 512, nullptr));
}

TEST_CASE("objects of different key spaces at one address are distinct") {
    LiveRegion region(256);
    LiveTable table;
    REQUIRE(region.attach_to(table));
    REQUIRE(added(table.insert(slot_of(0x1000, 4096, MemoryKind::Device), nullptr)));
    REQUIRE(added(table.insert(slot_of(0x1000, 256, MemoryKind::Block), nullptr)));
    REQUIRE(added(table.insert(slot_of(0x1000, 1 << 21, MemoryKind::VmmPhysical), nullptr)));

    LiveSlot removed{};
    REQUIRE(table.remove(KeySpace::BlockSpace, 0x1000, &removed));
    CHECK(removed.size == 256);
    REQUIRE(table.find(KeySpace::Pointer, 0x1000, &removed));
    CHECK(removed.size == 4096);
    REQUIRE(table.find(KeySpace::VmmHandle, 0x1000, &removed));
    CHECK(removed.size == 1 << 21);
}

TEST_CASE("an address allocated again without a seen free replaces the old object") {
    LiveRegion region(256);
    LiveTable table;
    REQUIRE(region.attach_to(table));
    REQUIRE(added(table.insert(slot_of(0x2000, 10), nullptr)));
    LiveSlot replaced{};
    REQUIRE(table.insert(slot_of(0x2000, 20), &replaced).replaced);
    CHECK(replaced.size == 10);
    CHECK(table.live_count() == 1);
    CHECK(live_in_file(region.slots).size() == 1);
}

TEST_CASE("a full table keeps new objects in private memory, counted by site, and frees them exactly") {
    LiveRegion region(LiveTable::kStripes); // one slot per stripe
    SpillRegion spill(8);
    REQUIRE(spill.attach());
    LiveTable table;
    REQUIRE(table.attach(&region.marks, region.slots.data(), region.slots.size(), nullptr, &spill.spill));
    constexpr uint64_t kObjects = 4 * LiveTable::kStripes;
    for (uint64_t i = 1; i <= kObjects; ++i) {
        LiveSlot slot = slot_of(i * 4096, i);
        slot.stack_id = i % 2 == 0 ? 7 : 9;
        slot.sequence = i;
        REQUIRE(added(table.insert(slot, nullptr)));
    }
    CHECK(table.live_count() == kObjects);
    const uint64_t in_file = live_in_file(region.slots).size();
    CHECK(in_file == LiveTable::kStripes);
    CHECK(table.spilled_count() == kObjects - in_file);
    CHECK(marks_cover_the_table(region));

    // Each spilled object is found and freed with everything it was made with.
    LiveSlot found{};
    for (uint64_t i = 1; i <= kObjects; ++i) {
        REQUIRE(table.find(KeySpace::Pointer, i * 4096, &found));
        CHECK(found.size == i);
        CHECK(found.state == gpuleak::format::kSlotLive);
    }
    CHECK(spill.used == 3); // the unattributed record and the two stacks
    CHECK(spill.tally(7).count + spill.tally(9).count == table.spilled_count());
    for (uint64_t i = 1; i <= kObjects; ++i) {
        LiveSlot removed{};
        REQUIRE(table.remove(KeySpace::Pointer, i * 4096, &removed));
        CHECK(removed.size == i);
        CHECK(removed.stack_id == (i % 2 == 0 ? 7u : 9u));
        CHECK(removed.sequence == i);
    }
    CHECK(table.live_count() == 0);
    CHECK(spill.tally(7).count == 0);
    CHECK(spill.tally(9).bytes == 0);
    CHECK(live_in_file(region.slots).empty());
}

TEST_CASE("spill sites that do not fit are counted in the unattributed record") {
    SpillRegion spill(3);
    REQUIRE(spill.attach());
    std::vector<uint32_t> ids;
    for (uint32_t stack = 1; stack <= 4; ++stack) {
        LiveSlot slot = slot_of(stack * 4096, 100);
        slot.stack_id = stack;
        ids.push_back(spill.spill.add(slot));
    }
    CHECK(ids == std::vector<uint32_t>{1, 2, 0, 0});
    CHECK(spill.used == 3);
    CHECK(spill.records[0].commit == gpuleak::format::kRecordCommit);
    CHECK(spill.tally(0).count == 2);
    CHECK(spill.tally(0).bytes == 200);
    LiveSlot freed = slot_of(3 * 4096, 100);
    spill.spill.remove(0, freed);
    CHECK(spill.tally(0).count == 1);
}

TEST_CASE("a spill site's buckets say where in the order of events its live allocations were made") {
    SpillRegion spill(2);
    REQUIRE(spill.attach());
    const auto allocation = [](uint64_t sequence) {
        LiveSlot slot = slot_of(sequence * 4096, 64);
        slot.stack_id = 5;
        slot.sequence = sequence;
        slot.time_ns = 1000 + sequence;
        return slot;
    };
    for (uint64_t sequence : {1, 2, 3, 40})
        REQUIRE(spill.spill.add(allocation(sequence)) == 1);
    const gpuleak::format::SpillSite& site = spill.records[1];
    // 40 is past 16 buckets of one event: they were merged until it fit, in buckets of 4.
    CHECK(site.bucket_shift == 2);
    CHECK(site.buckets[0].count == 3);
    CHECK(site.buckets[0].first_time_ns == 1001);
    CHECK(site.buckets[0].last_time_ns == 1003);
    CHECK(site.buckets[10].count == 1);
    // Allocations made early and freed leave their bucket, not the others.
    for (uint64_t sequence : {1, 2, 3})
        spill.spill.remove(1, allocation(sequence));
    CHECK(site.buckets[0].count == 0);
    CHECK(site.buckets[10].count == 1);
    CHECK(site.tally[site.version % 2].count == 1);
    CHECK(site.tally[site.version % 2].bytes == 64);
}

TEST_CASE("heavy churn stays exact (tombstones are rebuilt away)") {
    LiveRegion region(2048);
    LiveTable table;
    REQUIRE(region.attach_to(table));
    std::set<uint64_t> expected;
    for (uint64_t i = 0; i < 200000; ++i) {
        uint64_t address = 0x10000 + (i % 5000) * 256 + (i / 5000) * 0x10000000;
        REQUIRE(added(table.insert(slot_of(address, 256), nullptr)));
        if (i % 7 != 0)
            REQUIRE(table.remove(KeySpace::Pointer, address, nullptr));
        else
            expected.insert(address);
        if (expected.size() > 500) {
            for (uint64_t old : expected)
                REQUIRE(table.remove(KeySpace::Pointer, old, nullptr));
            expected.clear();
        }
    }
    CHECK(live_in_file(region.slots) == expected);
    CHECK(marks_cover_the_table(region));
}

TEST_CASE("a range release finds every mapping inside it") {
    LiveRegion region(1024);
    LiveTable table;
    REQUIRE(region.attach_to(table));
    for (uint64_t i = 0; i < 8; ++i)
        REQUIRE(added(
            table.insert(slot_of(0x40000000 + i * 0x200000, 0x200000, MemoryKind::VmmMapping), nullptr)));
    LiveSlot removed{};
    std::vector<uint64_t> order;
    while (table.remove_first_in(KeySpace::VmmRange, 0x40000000 + 0x100000, 0x40000000 + 0x700000, &removed))
        order.push_back(removed.address);
    CHECK(order == std::vector<uint64_t>{0x40200000, 0x40400000, 0x40600000});
    CHECK(table.live_count() == 5);
}

TEST_CASE("the stripes' marks cover every live slot through frees and reuse") {
    LiveRegion region(4096);
    LiveTable table;
    REQUIRE(region.attach_to(table));
    std::mt19937_64 random(42);
    std::vector<uint64_t> live;
    for (int step = 0; step < 20000; ++step) {
        // Mostly inserts while the table is small, mostly removals once it holds a quarter of its slots.
        if (live.empty() || random() % 4096 >= live.size() * 4) {
            const uint64_t address = (random() % (1u << 20)) * 256 + 0x100000;
            if (added(table.insert(slot_of(address, 256), nullptr)))
                live.push_back(address);
        } else {
            const std::size_t victim = random() % live.size();
            REQUIRE(table.remove(KeySpace::Pointer, live[victim], nullptr));
            live[victim] = live.back();
            live.pop_back();
        }
        if (step % 1000 == 0)
            REQUIRE(marks_cover_the_table(region));
    }
    CHECK(marks_cover_the_table(region));
    CHECK(live_in_file(region.slots) == std::set<uint64_t>(live.begin(), live.end()));
    // The marks follow the most ever live at once, not the inserts made.
    CHECK(marks_total(region.marks) < 4096);
}

TEST_CASE("freed slots are reused before a stripe's mark grows") {
    LiveRegion region(1024);
    LiveTable table;
    REQUIRE(region.attach_to(table));
    for (uint64_t i = 1; i <= 200; ++i)
        REQUIRE(added(table.insert(slot_of(i * 4096, 1), nullptr)));
    const LiveStripeMarks after_first = region.marks;
    CHECK(marks_total(after_first) == 200);
    for (int round = 0; round < 10; ++round) {
        for (uint64_t i = 1; i <= 200; ++i)
            REQUIRE(table.remove(KeySpace::Pointer, i * 4096, nullptr));
        for (uint64_t i = 1; i <= 200; ++i)
            REQUIRE(added(table.insert(slot_of(i * 4096, 1), nullptr)));
    }
    CHECK(std::memcmp(&region.marks, &after_first, sizeof(LiveStripeMarks)) == 0);
    CHECK(marks_cover_the_table(region));
}

TEST_CASE("a trace file's live table is read back exactly up to the marks") {
    TempDir dir;
    gpuleak::Config config = gpuleak::read_config();
    std::snprintf(config.output_pattern, sizeof config.output_pattern, "%s", (dir.path() + "/trace").c_str());
    config.max_bytes = gpuleak::kMinMaxMb << 20;
    gpuleak::TraceWriter writer;
    REQUIRE(writer.create(config, {4242, 1, ""}));
    gpuleak::format::FileHeader& header = *writer.header();
    SpillSites spill;
    REQUIRE(spill.attach(writer.spill_sites(), header.spill_capacity, &header.spill_used));
    LiveTable table;
    REQUIRE(table.attach(writer.live_marks(), writer.live_slots(), header.live_capacity, &writer, &spill));
    // Past the file's slots: the rest are counted by site.
    const uint64_t objects = header.live_capacity + 5000;
    std::set<uint64_t> expected;
    uint64_t expected_bytes = 0;
    for (uint64_t i = 1; i <= objects; ++i) {
        REQUIRE(added(table.insert(slot_of(i * 512, i), nullptr)));
        expected.insert(i * 512);
        expected_bytes += i;
    }
    for (uint64_t i = 1; i <= objects; i += 2) {
        REQUIRE(table.remove(KeySpace::Pointer, i * 512, nullptr));
        expected.erase(i * 512);
        expected_bytes -= i;
    }
    for (uint64_t i = objects + 1; i <= objects + 500; ++i) {
        REQUIRE(added(table.insert(slot_of(i * 512, i), nullptr)));
        expected.insert(i * 512);
        expected_bytes += i;
    }
    const gpuleak::analyzer::TraceReader trace = gpuleak::analyzer::TraceReader::open(writer.path());
    std::set<uint64_t> read_back;
    uint64_t bytes = 0;
    for (const auto& allocation : trace.live_allocations().allocations) {
        read_back.insert(allocation.address);
        bytes += allocation.size;
    }
    uint64_t spilled = 0;
    for (const auto& site : trace.live_allocations().spilled) {
        spilled += site.count;
        bytes += site.bytes;
    }
    CHECK(std::includes(expected.begin(), expected.end(), read_back.begin(), read_back.end()));
    CHECK(read_back.size() + spilled == expected.size());
    CHECK(spilled == table.spilled_count());
    CHECK(spilled > 0);
    CHECK(bytes == expected_bytes);
    CHECK(trace.warnings().empty());
}

TEST_CASE("the live slots take blocks on disk only as they are used") {
    TempDir dir;
    gpuleak::Config config = gpuleak::read_config();
    std::snprintf(config.output_pattern, sizeof config.output_pattern, "%s", (dir.path() + "/trace").c_str());
    config.max_bytes = uint64_t{256} << 20;
    gpuleak::TraceWriter writer;
    REQUIRE(writer.create(config, {4243, 1, ""}));
    gpuleak::format::FileHeader& header = *writer.header();
    LiveTable table;
    REQUIRE(table.attach(writer.live_marks(), writer.live_slots(), header.live_capacity, &writer));
    const auto disk_bytes = [&] {
        struct stat status {};
        REQUIRE(::stat(writer.path(), &status) == 0);
        CHECK(static_cast<uint64_t>(status.st_size) == header.file_bytes);
        return static_cast<uint64_t>(status.st_blocks) * 512;
    };
    const uint64_t at_start = disk_bytes();
    CHECK(at_start < header.live.offset + (8 << 20));
    for (uint64_t i = 1; i <= 200000; ++i)
        REQUIRE(added(table.insert(slot_of(i * 512, 1), nullptr)));
    CHECK(table.spilled_count() == 0);
    const uint64_t grown = disk_bytes() - at_start;
    CHECK(grown >= 200000 * sizeof(LiveSlot));
    CHECK(grown < 200000 * sizeof(LiveSlot) + LiveTable::kStripes * 1024 * sizeof(LiveSlot) + (1 << 20));
}

TEST_CASE("threads spilling and freeing at once keep the table and the spill tallies exact") {
    LiveRegion region(2 * LiveTable::kStripes);
    SpillRegion spill(16);
    REQUIRE(spill.attach());
    LiveTable table;
    REQUIRE(table.attach(&region.marks, region.slots.data(), region.slots.size(), nullptr, &spill.spill));
    constexpr uint64_t kThreads = 4;
    constexpr uint64_t kPerThread = 3000;
    std::vector<std::thread> threads;
    std::atomic<uint64_t> failures{0};
    for (uint64_t t = 0; t < kThreads; ++t)
        threads.emplace_back([&, t] {
            for (uint64_t i = 0; i < kPerThread; ++i) {
                LiveSlot slot = slot_of((t << 32) + (i + 1) * 256, 256);
                slot.stack_id = static_cast<uint32_t>(t + 1);
                if (!added(table.insert(slot, nullptr)))
                    ++failures;
                // Every other object freed again, some of them while others of its site spill.
                if (i % 2 == 1 && !table.remove(KeySpace::Pointer, (t << 32) + i * 256, nullptr))
                    ++failures;
            }
        });
    for (std::thread& thread : threads)
        thread.join();
    CHECK(failures == 0);
    CHECK(table.live_count() == kThreads * kPerThread / 2);
    const gpuleak::format::SpillTally spilled = spill.tally();
    CHECK(spilled.count == table.spilled_count());
    CHECK(spilled.bytes == spilled.count * 256);
    CHECK(spilled.count + live_in_file(region.slots).size() == table.live_count());
}
