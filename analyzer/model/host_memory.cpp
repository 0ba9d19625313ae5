#include "model/host_memory.h"

#include <algorithm>

#include "common/name_table.h"

namespace gpuleak::analyzer {

using format::HostField;

namespace {

void raise_to(std::optional<uint64_t>& peak, uint64_t value) {
    peak = std::max(peak.value_or(0), value);
}

uint64_t less(uint64_t value, uint64_t taken) {
    return value > taken ? value - taken : 0;
}

// The simulated device's memory is the process's own: physical memory of the virtual memory management
// API (cuMemCreate) is a memfd, resident as shared memory, and the rest is anonymous memory, of which only
// the pages the program wrote are resident where the sample says (a large allocation is mapped untouched).
void leave_out_simulated_device(HostPoint& point, const TimelineSample& sample) {
    uint64_t device = 0;
    for (uint64_t bytes : sample.device_bytes)
        device += bytes;
    const uint64_t shared =
        std::min(device, sample.kind_bytes[static_cast<int>(format::MemoryKind::VmmPhysical)]);
    if (point.has(HostField::SimulatedDeviceResident))
        device = shared + std::min(device - shared, uint64_t{sample.host.simulated_device_resident_pages} *
                                                        format::kResidentPageBytes);
    point.simulated_device_bytes = std::min(device, point.rss);
    point.rss = less(point.rss, device);
    point.sample.rss_shmem = less(point.sample.rss_shmem, shared);
    point.sample.rss_anon = less(point.sample.rss_anon, device - shared);
    point.sample.uss = less(point.sample.uss, device);
    point.sample.pss = less(point.sample.pss, device);
}

} // namespace

const char* role_kind_name(RoleKind kind) {
    static constexpr NameTable kNames({{RoleKind::Program, "program"},
                                       {RoleKind::DataLoaderWorker, "dataloader_worker"},
                                       {RoleKind::ForkedWorker, "forked_worker"},
                                       {RoleKind::ForkedChild, "forked_child"},
                                       {RoleKind::SpawnedChild, "spawned_child"},
                                       {RoleKind::ResourceTracker, "resource_tracker"},
                                       {RoleKind::ForkServer, "fork_server"},
                                       {RoleKind::Rank, "rank"}},
                                      RoleKind::Program);
    return kNames[kind];
}

const char* start_method_name(StartMethod method) {
    static constexpr NameTable kNames({{StartMethod::Unknown, nullptr},
                                       {StartMethod::Fork, "fork"},
                                       {StartMethod::Spawn, "spawn"},
                                       {StartMethod::Forkserver, "forkserver"}},
                                      StartMethod::Unknown);
    return kNames[method];
}

HostMemory build_host_memory(const TraceReader& trace) {
    HostMemory host;
    const uint64_t start = trace.header().start_monotonic_ns;
    for (const TimelineSample& sample : trace.timeline()) {
        if (sample.rss_bytes == 0)
            continue;
        HostPoint point{sample.time_ns > start ? sample.time_ns - start : 0, sample.events, sample.rss_bytes,
                        sample.host};
        point.python_modules = sample.python_modules;
        if (trace.header().simulated_device())
            leave_out_simulated_device(point, sample);
        host.peak_rss = std::max(host.peak_rss, point.rss);
        if (point.has(HostField::Proportional)) {
            raise_to(host.peak_uss, point.sample.uss);
            raise_to(host.peak_pss, point.sample.pss);
        }
        if (point.has(HostField::Status)) {
            raise_to(host.peak_shmem, point.sample.rss_shmem);
            raise_to(host.peak_swap, point.sample.swap);
        }
        if (point.has(HostField::Cgroup))
            raise_to(host.peak_cgroup, point.sample.cgroup_bytes);
        if (point.has(HostField::CgroupLimit))
            host.cgroup_limit = point.sample.cgroup_limit_bytes;
        if (point.has(HostField::Available))
            host.lowest_available =
                std::min(host.lowest_available.value_or(UINT64_MAX), point.sample.available_bytes);
        host.points.push_back(point);
    }
    return host;
}

std::vector<ForkRecord> fork_records(const TraceReader& trace) {
    std::vector<ForkRecord> forks;
    for (const Event& event : trace.notable_events().events) {
        if (event.type != format::EventType::Fork)
            continue;
        if (const std::optional<int32_t> child = event.fork_child_pid())
            forks.push_back(ForkRecord{*child, event.time_ns, event.stack_id, event.fork_origin()});
    }
    std::sort(forks.begin(), forks.end(),
              [](const ForkRecord& a, const ForkRecord& b) { return a.monotonic_ns < b.monotonic_ns; });
    return forks;
}

} // namespace gpuleak::analyzer
