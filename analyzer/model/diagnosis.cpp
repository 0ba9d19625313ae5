#include "diagnosis.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

namespace gpuleak::analyzer {

namespace {

constexpr uint64_t kMiB = uint64_t{1} << 20;

// Cache growth: reserved memory rose well above the most the program ever had allocated at once, by
// enough to matter on the device. A cache that holds what the program once needed is the allocator
// doing its job, and a few MiB of it on a large device is nobody's problem.
constexpr uint64_t kMinCacheExcess = 8 * kMiB;
constexpr double kMinCacheExcessShare = 0.25;   // of the peak of allocated memory
constexpr double kMinCacheCapacityShare = 0.01; // of the device's memory, where it is known
constexpr uint64_t kMinCacheMention = 8 * kMiB;
constexpr uint64_t kMinOutsideBytes = 256 * kMiB;
constexpr double kMinOutsideShare = 0.25; // of the most in use per the driver
constexpr uint64_t kMinRssGrowth = 256 * kMiB;
constexpr double kMinRssGrowthShare = 0.5; // of the first sample

const DeviceSummary* device_of(const ProcessModel& model, int device) {
    for (const DeviceSummary& summary : model.devices)
        if (summary.device == device)
            return &summary;
    return nullptr;
}

// The device a site's memory is on, by the site's stack of most bytes being that device's: a site is
// one kind, and in practice one device; what matters here is whose free memory it eats.
std::optional<FillEstimate> fill_estimate(const ProcessModel& model, const LeakSite& site) {
    if (!format::occupies_device_memory(site.kind) && site.kind != format::MemoryKind::Block)
        return std::nullopt;
    const DeviceSummary* device = device_of(model, site.device);
    if (device == nullptr || !device->lowest_free || site.count == 0)
        return std::nullopt;
    FillEstimate estimate;
    estimate.device = device->device;
    estimate.free_bytes = *device->lowest_free;
    const double free = static_cast<double>(estimate.free_bytes);
    estimate.seconds = site.bytes_per_second > 0 ? free / site.bytes_per_second : 0;
    estimate.allocations = free / (static_cast<double>(site.bytes) / static_cast<double>(site.count));
    return estimate;
}

std::optional<CacheFacts> cache_growth(const ProcessModel& model) {
    if (!model.reports_blocks)
        return std::nullopt;
    for (const DeviceSummary& device : model.devices) {
        const uint64_t cached = device.final_reserved > device.final_allocated
                                    ? device.final_reserved - device.final_allocated
                                    : 0;
        const uint64_t excess =
            device.peak_reserved > device.peak_allocated ? device.peak_reserved - device.peak_allocated : 0;
        const bool weighs =
            !device.capacity ||
            static_cast<double>(cached) >= kMinCacheCapacityShare * static_cast<double>(*device.capacity);
        if (cached >= kMinCacheExcess && excess >= kMinCacheExcess &&
            static_cast<double>(excess) >=
                kMinCacheExcessShare * static_cast<double>(device.peak_allocated) &&
            weighs)
            return CacheFacts{device.device, device.peak_allocated, device.final_allocated,
                              device.peak_reserved, device.final_reserved};
    }
    return std::nullopt;
}

std::optional<OutsideFacts> outside_allocators(const ProcessModel& model) {
    for (const DeviceSummary& device : model.devices) {
        if (!device.peak_used_by_driver || *device.peak_used_by_driver <= device.peak_reserved)
            continue;
        const uint64_t used = *device.peak_used_by_driver;
        const uint64_t outside = used - device.peak_reserved;
        if (outside >= kMinOutsideBytes &&
            static_cast<double>(outside) >= kMinOutsideShare * static_cast<double>(used))
            return OutsideFacts{device.device, used, device.peak_reserved};
    }
    return std::nullopt;
}

std::optional<HostRamFacts> host_ram_growth(const ProcessModel& model) {
    const std::optional<uint64_t> last_rss = model.code_end_rss ? model.code_end_rss : model.last_rss;
    if (!model.first_rss || !last_rss || *last_rss <= *model.first_rss)
        return std::nullopt;
    const uint64_t growth = *last_rss - *model.first_rss;
    if (growth < kMinRssGrowth ||
        static_cast<double>(growth) < kMinRssGrowthShare * static_cast<double>(*model.first_rss))
        return std::nullopt;
    return HostRamFacts{*model.first_rss, *last_rss, model.code_end_rss.has_value()};
}

} // namespace

const char* diagnosis_kind_name(DiagnosisKind kind) {
    switch (kind) {
    case DiagnosisKind::Leak:
        return "leak";
    case DiagnosisKind::CacheGrowth:
        return "cache_growth";
    case DiagnosisKind::OutsideAllocators:
        return "outside_allocators";
    case DiagnosisKind::HostRamGrowth:
        return "host_ram_growth";
    case DiagnosisKind::Incomplete:
        return "incomplete";
    case DiagnosisKind::Stable:
        break;
    }
    return "stable";
}

std::string human_bytes(double bytes) {
    const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    int unit = 0;
    while (std::fabs(bytes) >= 1024.0 && unit < 4) {
        bytes /= 1024.0;
        ++unit;
    }
    return unit == 0 ? fmt::format("{:.0f} B", bytes) : fmt::format("{:.1f} {}", bytes, units[unit]);
}

Diagnosis diagnose(const ProcessModel& model) {
    Diagnosis diagnosis;
    for (const DeviceSummary& device : model.devices) {
        diagnosis.peak_allocated += device.peak_allocated;
        diagnosis.final_allocated += device.final_allocated;
        diagnosis.final_reserved += device.final_reserved;
    }
    if (diagnosis.final_reserved > diagnosis.final_allocated + kMinCacheMention - 1 && model.reports_blocks)
        diagnosis.cached_at_end = diagnosis.final_reserved - diagnosis.final_allocated;
    if (!model.failures.empty())
        diagnosis.largest_failure = static_cast<size_t>(
            std::max_element(model.failures.begin(), model.failures.end(),
                             [](const auto& a, const auto& b) { return a.bytes < b.bytes; }) -
            model.failures.begin());

    // A leak, at any size: what grows without bound fills any device in the end.
    if (!model.growth_sites.empty()) {
        LeakFacts leak;
        leak.sites = model.growth_sites;
        for (size_t index : leak.sites)
            leak.bytes += model.leak_sites[index].bytes;
        leak.fill = fill_estimate(model, model.leak_sites[leak.sites.front()]);
        diagnosis.kind = DiagnosisKind::Leak;
        diagnosis.leak = std::move(leak);
    } else if ((diagnosis.cache = cache_growth(model))) {
        diagnosis.kind = DiagnosisKind::CacheGrowth;
    } else if ((diagnosis.outside = outside_allocators(model))) {
        diagnosis.kind = DiagnosisKind::OutsideAllocators;
    } else if ((diagnosis.host_ram = host_ram_growth(model))) {
        diagnosis.kind = DiagnosisKind::HostRamGrowth;
    } else if (model.exactness.lost()) {
        diagnosis.kind = DiagnosisKind::Incomplete;
    }
    return diagnosis;
}

} // namespace gpuleak::analyzer
