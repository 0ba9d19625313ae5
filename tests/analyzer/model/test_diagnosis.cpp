// The verdict weighs sizes against the device and the process's peak: which caches are a problem,
// which leak is one at any size, and how long the free memory would last.
#include <catch2/catch.hpp>

#include "model/diagnosis.h"
#include "model/process_model.h"

using namespace gpuleak;
using namespace gpuleak::analyzer;

namespace {

constexpr uint64_t kMiB = uint64_t{1} << 20;
constexpr uint64_t kGiB = kMiB << 10;

// A PyTorch-like process on a 16 GiB device: blocks reported, some freed, nothing growing.
ProcessModel torch_process(uint64_t peak_allocated, uint64_t final_allocated, uint64_t peak_reserved,
                           uint64_t final_reserved) {
    ProcessModel model;
    model.reports_blocks = true;
    model.freed_blocks = true;
    DeviceSummary device;
    device.peak_allocated = peak_allocated;
    device.final_allocated = final_allocated;
    device.peak_reserved = peak_reserved;
    device.final_reserved = final_reserved;
    device.capacity = 16 * kGiB;
    device.lowest_free = 16 * kGiB - peak_reserved;
    device.peak_used_by_driver = peak_reserved;
    model.devices.push_back(device);
    return model;
}

} // namespace

TEST_CASE("a cache that holds no more than the program once needed is not cache growth") {
    // Trials whose tensors were all freed: the cache keeps 1 GiB, which allocated once reached.
    const Diagnosis diagnosis = diagnose(torch_process(1 * kGiB, 0, 1 * kGiB, 1 * kGiB));
    CHECK(diagnosis.kind == DiagnosisKind::Stable);
    CHECK(diagnosis.cached_at_end == 1 * kGiB);
}

TEST_CASE("what a model just made leaves of its segments is not cache growth, on any device") {
    // Two 4 MiB parameters in a 20 MiB segment and the small ones in a 2 MiB one, nothing freed yet.
    ProcessModel model = torch_process(8 * kMiB, 8 * kMiB, 22 * kMiB, 22 * kMiB);
    model.devices[0].capacity = 512 * kMiB;
    model.devices[0].lowest_free = 490 * kMiB;
    model.freed_blocks = false;
    CHECK(diagnose(model).kind == DiagnosisKind::Stable);
    model.freed_blocks = true;
    CHECK(diagnose(model).kind == DiagnosisKind::CacheGrowth);
}

TEST_CASE("a few MiB of cache on a large device are stable") {
    // One 4 MiB tensor kept, 18 MiB cached, on 16 GiB.
    const Diagnosis diagnosis = diagnose(torch_process(10 * kMiB, 4 * kMiB, 22 * kMiB, 22 * kMiB));
    CHECK(diagnosis.kind == DiagnosisKind::Stable);
    CHECK(diagnosis.cached_at_end == 18 * kMiB);
}

TEST_CASE(
    "reserved memory well above what allocated ever reached, that matters on the device, is cache growth") {
    const Diagnosis diagnosis = diagnose(torch_process(233 * kMiB, 116 * kMiB, 1334 * kMiB, 1334 * kMiB));
    REQUIRE(diagnosis.kind == DiagnosisKind::CacheGrowth);
    CHECK(diagnosis.cache->peak_allocated == 233 * kMiB);
    CHECK(diagnosis.cache->final_reserved == 1334 * kMiB);
    SECTION("not where reserved stayed within a quarter above the peak") {
        CHECK(diagnose(torch_process(1200 * kMiB, 100 * kMiB, 1334 * kMiB, 1334 * kMiB)).kind ==
              DiagnosisKind::Stable);
    }
}

TEST_CASE("a growing site is a leak at any size, with how long the free memory would last") {
    ProcessModel model = torch_process(100 * kMiB, 100 * kMiB, 100 * kMiB, 100 * kMiB);
    LeakSite site;
    site.kind = format::MemoryKind::Block;
    site.bytes = 48 * 1024;
    site.count = 96;
    site.growing = true;
    site.bytes_per_second = 1024 * 1024;
    model.leak_sites.push_back(site);
    model.growth_sites.push_back(0);
    const Diagnosis diagnosis = diagnose(model);
    REQUIRE(diagnosis.kind == DiagnosisKind::Leak);
    CHECK(diagnosis.leak->bytes == 48 * 1024);
    REQUIRE(diagnosis.leak->fill);
    CHECK(diagnosis.leak->fill->free_bytes == 16 * kGiB - 100 * kMiB);
    CHECK(diagnosis.leak->fill->seconds == Approx(static_cast<double>(16 * kGiB - 100 * kMiB) / kMiB));
    CHECK(diagnosis.leak->fill->allocations == Approx(static_cast<double>(16 * kGiB - 100 * kMiB) / 512));
}

TEST_CASE("a process with nothing found is stable only when nothing it made was lost") {
    ProcessModel model = torch_process(10 * kMiB, 4 * kMiB, 22 * kMiB, 22 * kMiB);
    // Counted by site, nothing is lost: the verdict stands.
    model.exactness.spilled_by_kind[format::MemoryKind::Block] = {1000, 1 * kMiB};
    CHECK(diagnose(model).kind == DiagnosisKind::Stable);
    SECTION("allocations that could not be recorded") {
        model.exactness.untracked = 3;
        CHECK(diagnose(model).kind == DiagnosisKind::Incomplete);
    }
    SECTION("allocations counted without their site") {
        model.exactness.spilled_by_kind[format::MemoryKind::None] = {3, 1536};
        CHECK(diagnose(model).kind == DiagnosisKind::Incomplete);
    }
}
