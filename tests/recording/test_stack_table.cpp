#include <catch2/catch.hpp>

#include <filesystem>
#include <thread>
#include <vector>

#include "recording/stack_table.h"
#include "temp_dir.h"

using gpuleak::StackTable;
using gpuleak::TraceWriter;

namespace {

gpuleak::Config small_config(const std::string& path) {
    gpuleak::Config config = gpuleak::read_config();
    std::snprintf(config.output_pattern, sizeof config.output_pattern, "%s", path.c_str());
    config.max_bytes = gpuleak::kMinMaxMb << 20;
    return config;
}

} // namespace

TEST_CASE("each distinct stack is stored once and keeps its id") {
    TempDir dir;
    TraceWriter writer;
    REQUIRE(writer.create(small_config(dir.path() + "/t.trace"), {1, 0, ""}));
    StackTable table;
    REQUIRE(table.attach(writer));

    const uint64_t a[] = {0x401000, 0x402000, 0x403000};
    const uint64_t b[] = {0x401000, 0x402000, 0x403001};
    bool added = false;
    uint32_t id_a = table.intern(a, 3, nullptr, 0, added);
    CHECK(added);
    uint32_t id_b = table.intern(b, 3, nullptr, 0, added);
    CHECK(added);
    CHECK(id_a != 0);
    CHECK(id_b != 0);
    CHECK(id_a != id_b);
    CHECK(table.intern(a, 3, nullptr, 0, added) == id_a);
    CHECK_FALSE(added);
    CHECK(table.intern(a, 2, nullptr, 0, added) != id_a); // a prefix is another stack
    CHECK(added);
    const uint64_t used = writer.header()->stacks_used;
    CHECK(table.intern(b, 3, nullptr, 0, added) == id_b);
    CHECK(writer.header()->stacks_used == used);
}

TEST_CASE("the Python frames are part of a stack's identity and are stored after its native frames") {
    TempDir dir;
    TraceWriter writer;
    REQUIRE(writer.create(small_config(dir.path() + "/t.trace"), {1, 0, ""}));
    StackTable table;
    REQUIRE(table.attach(writer));

    const uint64_t native[] = {0x401000, 0x402000};
    const gpuleak::format::PythonFrameRecord line_10[] = {{1, 10}, {2, 40}};
    const gpuleak::format::PythonFrameRecord line_12[] = {{1, 12}, {2, 40}};
    const gpuleak::format::PythonFrameRecord line_10_loop_entry[] = {
        {1, 10 | gpuleak::format::kPythonFrameLoopEntry}, {2, 40}};
    bool added = false;
    const uint32_t without_python = table.intern(native, 2, nullptr, 0, added);
    const uint32_t at_line_10 = table.intern(native, 2, line_10, 2, added);
    CHECK(added);
    const uint32_t at_line_12 = table.intern(native, 2, line_12, 2, added);
    CHECK(added);
    CHECK(at_line_10 != without_python);
    CHECK(at_line_12 != at_line_10);
    CHECK(table.intern(native, 2, line_10, 2, added) == at_line_10);
    CHECK_FALSE(added);
    CHECK(table.intern(native, 2, line_10, 1, added) != at_line_10); // fewer Python frames: another stack
    // The same frames run by other evaluation loops: another stack, placed otherwise by the report.
    const uint32_t loop_entry = table.intern(native, 2, line_10_loop_entry, 2, added);
    CHECK(added);
    CHECK(loop_entry != at_line_10);
    CHECK(table.intern(native, 2, line_10_loop_entry, 2, added) == loop_entry);
    CHECK_FALSE(added);

    // The record as a reader finds it: native addresses, then the Python frames.
    const gpuleak::format::StackRecord* found = nullptr;
    for (uint64_t offset = 0; offset < writer.header()->stacks_used;) {
        const auto* record = reinterpret_cast<const gpuleak::format::StackRecord*>(
            writer.stream_data(TraceWriter::Stream::Stacks, offset));
        if (record->id == at_line_12)
            found = record;
        offset += record->prefix.bytes;
    }
    REQUIRE(found != nullptr);
    CHECK(found->native_count == 2);
    CHECK(found->python_count == 2);
    CHECK(found->prefix.bytes == sizeof(*found) + 2 * sizeof(uint64_t) + 2 * sizeof(line_12[0]));
    const auto* addresses = reinterpret_cast<const uint64_t*>(found + 1);
    CHECK(addresses[0] == native[0]);
    CHECK(addresses[1] == native[1]);
    const auto* python = reinterpret_cast<const gpuleak::format::PythonFrameRecord*>(addresses + 2);
    CHECK(python[0].code_id == 1);
    CHECK(python[0].offset_and_flags == 12);
    CHECK(python[1].offset_and_flags == 40);
}

TEST_CASE("threads interning the same stacks at once agree on their ids") {
    TempDir dir;
    TraceWriter writer;
    REQUIRE(writer.create(small_config(dir.path() + "/t.trace"), {1, 0, ""}));
    StackTable table;
    REQUIRE(table.attach(writer));

    constexpr int kThreads = 4;
    constexpr int kStacks = 500;
    std::vector<std::vector<uint32_t>> ids(kThreads, std::vector<uint32_t>(kStacks));
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
        threads.emplace_back([&, t] {
            for (int round = 0; round < 3; ++round) {
                for (int s = 0; s < kStacks; ++s) {
                    const uint64_t frames[] = {0x1000u + static_cast<uint64_t>(s), 0x2000, 0x3000};
                    bool added = false;
                    ids[t][s] = table.intern(frames, 3, nullptr, 0, added);
                }
            }
        });
    }
    for (std::thread& thread : threads)
        thread.join();
    for (int s = 0; s < kStacks; ++s) {
        REQUIRE(ids[0][s] != 0);
        for (int t = 1; t < kThreads; ++t)
            CHECK(ids[t][s] == ids[0][s]);
    }
    const uint64_t expected_bytes = kStacks * (sizeof(gpuleak::format::StackRecord) + 3 * sizeof(uint64_t));
    CHECK(writer.header()->stacks_used == expected_bytes);
}

TEST_CASE("stacks that no longer fit are counted and not written") {
    TempDir dir;
    TraceWriter writer;
    REQUIRE(writer.create(small_config(dir.path() + "/t.trace"), {1, 0, ""}));
    StackTable table;
    REQUIRE(table.attach(writer));
    std::vector<uint64_t> frames(200);
    uint64_t dropped_ids = 0;
    for (uint64_t s = 0; s < 20000; ++s) {
        frames[0] = s;
        bool added = false;
        if (table.intern(frames.data(), 200, nullptr, 0, added) == 0)
            ++dropped_ids;
    }
    CHECK(dropped_ids > 0);
    CHECK(writer.header()->stacks_dropped == dropped_ids);
    CHECK(writer.header()->stacks_used <= writer.header()->stacks.size);
}
