#include <catch2/catch.hpp>

#include <set>
#include <vector>

#include "live_table.h"

using gpuleak::LiveTable;
using gpuleak::format::KeySpace;
using gpuleak::format::LiveSlot;
using gpuleak::format::MemoryKind;

namespace {

LiveSlot slot_of(uint64_t address, uint64_t size, MemoryKind kind = MemoryKind::Device) {
    LiveSlot slot{};
    slot.address = address;
    slot.size = size;
    slot.kind = static_cast<uint8_t>(kind);
    slot.device = 0;
    return slot;
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
    std::vector<LiveSlot> slots(4096);
    LiveTable table;
    REQUIRE(table.attach(slots.data(), slots.size()));

    std::set<uint64_t> expected;
    for (uint64_t i = 1; i <= 1000; ++i) {
        REQUIRE(table.insert(slot_of(i * 512, i), nullptr) == LiveTable::InsertResult::Inserted);
        expected.insert(i * 512);
    }
    for (uint64_t i = 1; i <= 1000; i += 3) {
        LiveSlot removed{};
        REQUIRE(table.remove(KeySpace::Pointer, i * 512, &removed));
        CHECK(removed.size == i);
        expected.erase(i * 512);
    }
    CHECK(live_in_file(slots) == expected);
    CHECK(table.live_count() == expected.size());

    LiveSlot found{};
    REQUIRE(table.find(KeySpace::Pointer, 2 * 512, &found));
    CHECK(found.size == 2);
    CHECK_FALSE(table.find(KeySpace::Pointer, 1 * 512, &found));
    CHECK_FALSE(table.remove(KeySpace::Pointer, 1 * 512, nullptr));
}

TEST_CASE("objects of different key spaces at one address are distinct") {
    std::vector<LiveSlot> slots(256);
    LiveTable table;
    REQUIRE(table.attach(slots.data(), slots.size()));
    REQUIRE(table.insert(slot_of(0x1000, 4096, MemoryKind::Device), nullptr) ==
            LiveTable::InsertResult::Inserted);
    REQUIRE(table.insert(slot_of(0x1000, 256, MemoryKind::Block), nullptr) ==
            LiveTable::InsertResult::Inserted);
    REQUIRE(table.insert(slot_of(0x1000, 1 << 21, MemoryKind::VmmPhysical), nullptr) ==
            LiveTable::InsertResult::Inserted);

    LiveSlot removed{};
    REQUIRE(table.remove(KeySpace::BlockSpace, 0x1000, &removed));
    CHECK(removed.size == 256);
    REQUIRE(table.find(KeySpace::Pointer, 0x1000, &removed));
    CHECK(removed.size == 4096);
    REQUIRE(table.find(KeySpace::VmmHandle, 0x1000, &removed));
    CHECK(removed.size == 1 << 21);
}

TEST_CASE("an address allocated again without a seen free replaces the old object") {
    std::vector<LiveSlot> slots(256);
    LiveTable table;
    REQUIRE(table.attach(slots.data(), slots.size()));
    REQUIRE(table.insert(slot_of(0x2000, 10), nullptr) == LiveTable::InsertResult::Inserted);
    LiveSlot replaced{};
    REQUIRE(table.insert(slot_of(0x2000, 20), &replaced) == LiveTable::InsertResult::Replaced);
    CHECK(replaced.size == 10);
    CHECK(table.live_count() == 1);
    CHECK(live_in_file(slots).size() == 1);
}

TEST_CASE("a full table refuses new objects and keeps the ones it has") {
    std::vector<LiveSlot> slots(LiveTable::kStripes); // one slot per stripe
    LiveTable table;
    REQUIRE(table.attach(slots.data(), slots.size()));
    uint64_t inserted = 0;
    uint64_t refused = 0;
    for (uint64_t i = 1; i <= 4 * LiveTable::kStripes; ++i) {
        if (table.insert(slot_of(i * 4096, 1), nullptr) == LiveTable::InsertResult::Full)
            ++refused;
        else
            ++inserted;
    }
    CHECK(inserted <= LiveTable::kStripes);
    CHECK(refused == 4 * LiveTable::kStripes - inserted);
    CHECK(live_in_file(slots).size() == inserted);
    CHECK(table.live_count() == inserted);
}

TEST_CASE("heavy churn stays exact (tombstones are rebuilt away)") {
    std::vector<LiveSlot> slots(2048);
    LiveTable table;
    REQUIRE(table.attach(slots.data(), slots.size()));
    std::set<uint64_t> expected;
    for (uint64_t i = 0; i < 200000; ++i) {
        uint64_t address = 0x10000 + (i % 5000) * 256 + (i / 5000) * 0x10000000;
        REQUIRE(table.insert(slot_of(address, 256), nullptr) != LiveTable::InsertResult::Full);
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
    CHECK(live_in_file(slots) == expected);
}

TEST_CASE("a range release finds every mapping inside it") {
    std::vector<LiveSlot> slots(1024);
    LiveTable table;
    REQUIRE(table.attach(slots.data(), slots.size()));
    for (uint64_t i = 0; i < 8; ++i)
        REQUIRE(table.insert(slot_of(0x40000000 + i * 0x200000, 0x200000, MemoryKind::VmmMapping), nullptr) ==
                LiveTable::InsertResult::Inserted);
    LiveSlot removed{};
    std::vector<uint64_t> order;
    while (table.remove_first_in(KeySpace::VmmRange, 0x40000000 + 0x100000, 0x40000000 + 0x700000, &removed))
        order.push_back(removed.address);
    CHECK(order == std::vector<uint64_t>{0x40200000, 0x40400000, 0x40600000});
    CHECK(table.live_count() == 5);
}
