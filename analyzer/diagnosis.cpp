#include "diagnosis.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

namespace gpuleak::analyzer {

namespace {

constexpr double kMiB = 1024.0 * 1024.0;

// Thresholds: small enough to catch a leak of a few MiB in a short run, large enough that a warm-up
// cache or noise in a long one does not read as a problem.
constexpr double kMinLeakBytes = 1 * kMiB;
constexpr double kMinLeakShare = 0.05; // of the allocated memory at the end
constexpr double kMinCacheGap = 8 * kMiB;
constexpr double kMinCacheShare = 0.25; // of the reserved memory at the end
constexpr double kMinOutsideBytes = 256 * kMiB;
constexpr double kMinOutsideShare = 0.25; // of the most in use per the driver
constexpr double kMinRssGrowth = 256 * kMiB;
constexpr double kMinRssGrowthShare = 0.5; // of the first sample

uint64_t sum_devices(const ProcessModel& model, uint64_t DeviceSummary::*field) {
    uint64_t total = 0;
    for (const DeviceSummary& device : model.devices)
        total += device.*field;
    return total;
}

std::string marker_span(const ProcessModel& model, const LeakSite& site) {
    if (!site.marker_range || model.markers.empty())
        return fmt::format("between {:.1f} s and {:.1f} s", seconds_of(site.first_ns),
                           seconds_of(site.last_ns));
    auto name = [&](int index) { return index < 0 ? std::string("the start") : model.markers[index].label; };
    return fmt::format("from {} to {}", name(site.marker_range->first), name(site.marker_range->second));
}

std::string failure_sentence(const ProcessModel& model) {
    if (model.failures.empty())
        return "";
    const FailureSummary& largest =
        *std::max_element(model.failures.begin(), model.failures.end(),
                          [](const auto& a, const auto& b) { return a.bytes < b.bytes; });
    std::string free_then =
        largest.free_bytes
            ? fmt::format(" with {} free", human_bytes(static_cast<double>(*largest.free_bytes)))
            : std::string();
    std::string held = largest.reserved_then
                           ? fmt::format(" while {} was reserved there",
                                         human_bytes(static_cast<double>(*largest.reserved_then)))
                           : std::string();
    // A cap of the allocator's own (PyTorch's set_per_process_memory_fraction) with the device not full.
    const char* refused =
        largest.allocator_refused && largest.failed_cuda_allocations == 0
            ? " (the allocator refused it under a limit of its own: no CUDA allocation failed)"
            : "";
    return fmt::format(
        " {} allocation{} failed (out of memory); the largest asked for {} on device {}{}{}{}.",
        model.failures.size(), model.failures.size() == 1 ? "" : "s",
        human_bytes(static_cast<double>(largest.bytes)), largest.device, free_then, held, refused);
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

Diagnosis diagnose(const ProcessModel& model,
                   const std::function<std::string(uint32_t stack_id)>& describe_site) {
    const double final_allocated = static_cast<double>(sum_devices(model, &DeviceSummary::final_allocated));
    const double final_reserved = static_cast<double>(sum_devices(model, &DeviceSummary::final_reserved));
    const double peak_allocated = static_cast<double>(sum_devices(model, &DeviceSummary::peak_allocated));
    const std::string failures = failure_sentence(model);

    // A leak: survivors made steadily through the run. Where a sub-allocator reports blocks, only
    // blocks are what the program holds; its segments growing is the cache's business.
    double growing_bytes = 0;
    const LeakSite* top = nullptr;
    size_t growing_sites = 0;
    for (const LeakSite& site : model.leak_sites) {
        if (!site.growing || (model.reports_blocks && site.kind != format::MemoryKind::Block))
            continue;
        growing_bytes += static_cast<double>(site.bytes);
        ++growing_sites;
        if (top == nullptr || site.bytes > top->bytes)
            top = &site;
    }
    if (top != nullptr && growing_bytes >= kMinLeakBytes &&
        growing_bytes >= kMinLeakShare * final_allocated) {
        std::string rate =
            top->marker_range && top->bytes_per_marker_interval > 0
                ? fmt::format("{} per marker interval", human_bytes(top->bytes_per_marker_interval))
                : fmt::format("{}/s", human_bytes(top->bytes_per_second));
        return {DiagnosisKind::Leak,
                fmt::format("Allocated memory kept growing: {} made {} at {} site{} is still alive, {} of it "
                            "({}) from {}. That is a real leak: the program keeps references to memory it no "
                            "longer needs (a list that grows every iteration, an unbounded cache). Emptying "
                            "the allocator's cache will not help; fix the code that keeps them.{}",
                            human_bytes(growing_bytes), marker_span(model, *top), growing_sites,
                            growing_sites == 1 ? "" : "s", human_bytes(static_cast<double>(top->bytes)), rate,
                            describe_site(top->stack_id), failures)};
    }

    const double gap = final_reserved - final_allocated;
    if (model.reports_blocks && gap >= kMinCacheGap && gap >= kMinCacheShare * final_reserved) {
        return {
            DiagnosisKind::CacheGrowth,
            fmt::format("Allocated memory is steady (peak {}, {} at the end) but reserved grew to {}: the "
                        "caching allocator holds {} of cached, possibly fragmented, blocks. This is not a "
                        "leak. torch.cuda.empty_cache() gives unused cached memory back; "
                        "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True reduces fragmentation.{}",
                        human_bytes(peak_allocated), human_bytes(final_allocated),
                        human_bytes(final_reserved), human_bytes(gap), failures)};
    }

    for (const DeviceSummary& device : model.devices) {
        if (!device.peak_used_by_driver || *device.peak_used_by_driver <= device.peak_reserved)
            continue;
        const double used = static_cast<double>(*device.peak_used_by_driver);
        const double outside = used - static_cast<double>(device.peak_reserved);
        if (outside >= kMinOutsideBytes && outside >= kMinOutsideShare * used) {
            return {
                DiagnosisKind::OutsideAllocators,
                fmt::format("The driver reports up to {} of device {} in use, but this process obtained "
                            "at most {} through the allocation calls gpuleak sees: {} is held outside the "
                            "allocators. That is CUDA contexts (each takes hundreds of MiB), libraries that "
                            "allocate by other means (cuBLAS and cuDNN workspaces, NCCL buffers), or other "
                            "processes on the same GPU, such as DataLoader workers that initialised CUDA. "
                            "Look for other processes in nvidia-smi and keep CUDA out of worker "
                            "processes.{}",
                            human_bytes(used), device.device,
                            human_bytes(static_cast<double>(device.peak_reserved)), human_bytes(outside),
                            failures)};
        }
    }

    const std::optional<uint64_t> last_rss = model.code_end_rss ? model.code_end_rss : model.last_rss;
    if (model.first_rss && last_rss && *last_rss > *model.first_rss) {
        const double growth = static_cast<double>(*last_rss - *model.first_rss);
        if (growth >= kMinRssGrowth && growth >= kMinRssGrowthShare * static_cast<double>(*model.first_rss)) {
            return {
                DiagnosisKind::HostRamGrowth,
                fmt::format("GPU memory is steady but host memory (RSS) grew from {} to {}{}: the leak, if "
                            "any, is in host RAM (tensors kept on the CPU, DataLoader workers' copies).{}",
                            human_bytes(static_cast<double>(*model.first_rss)),
                            human_bytes(static_cast<double>(*last_rss)),
                            model.code_end_rss ? " before Python finalized" : "", failures)};
        }
    }

    return {DiagnosisKind::Stable,
            fmt::format(
                "No sign of a leak: allocated memory peaked at {} and ended at {}; reserved ended at {}.{}",
                human_bytes(peak_allocated), human_bytes(final_allocated), human_bytes(final_reserved),
                failures)};
}

} // namespace gpuleak::analyzer
