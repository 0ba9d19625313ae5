// Stacks stay symbolizable after the process is gone: the trace's module map covers libraries loaded
// after recording began, and blocks reported through the public C API are told from segments.
#include <catch2/catch.hpp>

#include <algorithm>

#include "read/trace_reader.h"
#include "traced_run.h"

using gpuleak::analyzer::TraceReader;
using gpuleak::format::MemoryKind;

TEST_CASE("a library loaded after recording began is in the module map with its allocations") {
    TempDir dir;
    const std::string plugin = program_path("libplugin_alloc.so");
    TracedRun run = run_traced(dir, program_path("late_plugin"), {plugin});
    REQUIRE(run.exited_with(0));
    REQUIRE(run.traces().size() == 1);
    TraceReader reader = TraceReader::open(run.traces()[0]);

    const auto& modules = reader.modules();
    auto module =
        std::find_if(modules.begin(), modules.end(), [&](const auto& m) { return m.path == plugin; });
    REQUIRE(module != modules.end());
    CHECK(!module->build_id.empty());

    // The segment the plugin allocated: its innermost frame lies in the plugin.
    const auto& live = reader.live_allocations().allocations;
    auto segment = std::find_if(live.begin(), live.end(), [](const auto& a) {
        return a.kind == MemoryKind::Device && a.size == (2u << 20);
    });
    REQUIRE(segment != live.end());
    const auto& frames = reader.stacks().at(segment->stack_id);
    REQUIRE(!frames.empty());
    CHECK(frames[0] >= module->low);
    CHECK(frames[0] < module->high);

    // One block freed, one still handed out, both inside the segment and counted apart from it.
    uint64_t blocks = 0;
    for (const auto& allocation : live) {
        if (allocation.kind != MemoryKind::Block)
            continue;
        ++blocks;
        CHECK(allocation.address == segment->address + 4096);
        CHECK(allocation.size == 8192);
    }
    CHECK(blocks == 1);
    CHECK(reader.header().accounting.live_bytes[0][static_cast<int>(MemoryKind::Block)] == 8192);
    CHECK(reader.header().accounting.live_bytes[0][static_cast<int>(MemoryKind::Device)] ==
          (1u << 20) + (2u << 20));
}
