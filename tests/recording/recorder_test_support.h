// What the recorder tests share: a trace in a fresh directory and the live set as a map.
#pragma once

#include <catch2/catch.hpp>

#include <cstdlib>
#include <map>
#include <string>

#include "read/trace_reader.h"
#include "recording/recorder.h"
#include "temp_dir.h"

namespace recorder_test {

inline std::string start_recording_into(const TempDir& dir) {
    setenv("GPULEAK_OUTPUT", (dir.path() + "/trace.%p").c_str(), 1);
    setenv("GPULEAK_QUIET", "1", 1);
    setenv("GPULEAK_STACK_DEPTH", "16", 1);
    REQUIRE(gpuleak::recording_active());
    return gpuleak::trace_path();
}

inline gpuleak::Allocation device_allocation(uint64_t address, uint64_t size, int16_t device = 0) {
    return gpuleak::Allocation{gpuleak::MemoryKind::Device, address, size, device, 0, 0};
}

inline std::map<uint64_t, uint64_t> live_of(const gpuleak::analyzer::TraceReader& reader) {
    std::map<uint64_t, uint64_t> live;
    for (const auto& allocation : reader.live_allocations().allocations)
        live[allocation.address] = allocation.size;
    return live;
}

} // namespace recorder_test
