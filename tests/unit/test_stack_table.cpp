#include <catch2/catch.hpp>

#include <filesystem>
#include <thread>
#include <vector>

#include "stack_table.h"
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
    uint32_t id_a = table.intern(a, 3, added);
    CHECK(added);
    uint32_t id_b = table.intern(b, 3, added);
    CHECK(added);
    CHECK(id_a != 0);
    CHECK(id_b != 0);
    CHECK(id_a != id_b);
    CHECK(table.intern(a, 3, added) == id_a);
    CHECK_FALSE(added);
    CHECK(table.intern(a, 2, added) != id_a); // a prefix is another stack
    CHECK(added);
    const uint64_t used = writer.header()->stacks_used;
    CHECK(table.intern(b, 3, added) == id_b);
    CHECK(writer.header()->stacks_used == used);
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
                    ids[t][s] = table.intern(frames, 3, added);
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
        if (table.intern(frames.data(), 200, added) == 0)
            ++dropped_ids;
    }
    CHECK(dropped_ids > 0);
    CHECK(writer.header()->stacks_dropped == dropped_ids);
    CHECK(writer.header()->stacks_used <= writer.header()->stacks.size);
}
