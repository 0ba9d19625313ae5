#include "model/diagnosis.h"

#include <algorithm>
#include <csignal>
#include <functional>

#include "common/name_table.h"

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
// Host growth: at least this much from the start of the process's work to its end, still a quarter of it
// in the second half of that stretch and an eighth in its last quarter, by each clock of its progress
// (a program that loads its data, imports its libraries or compiles its step once and then works is not
// growing, even when that took most of the time or of the events).
constexpr uint64_t kMinHostGrowth = 64 * kMiB;
constexpr double kMinLateHostGrowthShare = 0.25;
constexpr double kMinLastHostGrowthShare = 0.125;
constexpr double kImportsDoneShare = 0.95;
// And its two largest rises between consecutive samples made at most this share of it: what one
// allocation adds, caught between two samples or split by one, is not a trend, whatever it weighs
// against a short run; a steady leak spreads over however many samples the run took.
constexpr double kMaxTwoRisesShare = 0.75;
// What imports brought is said beside the growth from this share of all the measure rose by.
constexpr double kMinImportedShare = 1.0 / 16;
constexpr double kMaxCopyOnWriteRssShare = 0.5; // of the USS growth: RSS stayed (nearly) flat
constexpr double kMinPressureShare = 0.9;       // of the cgroup's limit, or of the machine's memory

// The device a site's memory is on, by the site's stack of most bytes being that device's: a site is
// one kind, and in practice one device; what matters here is whose free memory it eats.
std::optional<FillEstimate> fill_estimate(const ProcessModel& model, const LeakSite& site) {
    if (!format::occupies_device_memory(site.kind) && site.kind != format::MemoryKind::Block)
        return std::nullopt;
    const DeviceSummary* device = device_summary(model, site.device);
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
    // A program that never freed a block has nothing cached: a model just made fills part of the segments
    // made for its parameters, and emptying the cache gives none of them back.
    if (!model.reports_blocks || !model.freed_blocks)
        return std::nullopt;
    for (const DeviceSummary& device : model.devices) {
        const uint64_t cached = device.cached();
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

// Where the process's own work starts, up to `to`: a forked child's at its start (it inherits what its
// parent loaded); else a Python program's once its imports are done, when sys.modules first held nearly
// the most it held up to `to` (a spawned worker imports torch before it unpickles its dataset; a module
// imported for the results at the end moves it only when it brings many); and a program's that recorded
// events not before its first (before it, it imported and loaded). A marker set before the imports (a
// gpuleak.isolated child's, set before the call that imports its framework) is an event too: the
// imports still come first. Where its device work repeats, not before the end of its first step
// (ProcessModel::first_step_end_ns): a model's build and the compile of its step are set-up, and in a
// short process (a search's trial in a process of its own) they are most of its work.
size_t work_start(const ProcessModel& model, size_t to) {
    const std::vector<HostPoint>& points = model.host.points;
    if (!model.header.parent_trace.empty())
        return 0;
    // The most it held: at its last samples the interpreter may be finalizing, when it is not read.
    uint64_t imported = 0;
    for (size_t i = 0; i <= to; ++i)
        imported = std::max(imported, points[i].python_modules);
    size_t imports_done = 0;
    for (size_t i = 0; i < to && imported > 0; ++i)
        if (static_cast<double>(points[i].python_modules) >=
            kImportsDoneShare * static_cast<double>(imported)) {
            imports_done = i;
            break;
        }
    size_t start = imports_done;
    if (model.events > 0)
        for (size_t i = 0; i < points.size(); ++i)
            if (points[i].events > 0) {
                start = std::max(start, i);
                break;
            }
    if (model.first_step_end_ns)
        for (size_t i = start; i < points.size(); ++i)
            if (points[i].time_ns >= *model.first_step_end_ns)
                return i;
    return start;
}

// The last point at or before `share` of the way along a clock of [from, to], as an offset from `from`.
size_t point_at(const std::vector<double>& clock, double share) {
    size_t found = 0;
    for (size_t i = 0; i < clock.size() && clock[i] <= share * clock.back(); ++i)
        found = i;
    return found;
}

// Whether what a measure rose by between points i and i + 1 may have come with an import: sys.modules
// grew between them, or between the two before (a module is in sys.modules before its body runs, so
// what the body allocates may come after the sample that counted it).
bool importing(const std::vector<HostPoint>& points, size_t i) {
    const auto modules_grew = [&](size_t j) {
        return points[j].python_modules > 0 && points[j + 1].python_modules > points[j].python_modules;
    };
    return modules_grew(i) || (i > 0 && modules_grew(i - 1));
}

// A measure at each point of [from, to], less what it rose by while the process imported modules: a
// library's import brings memory with it (torch's hundreds of MiB), whenever it happens and whatever
// share of the run it takes.
template <typename Measure>
std::vector<double> counted_series(const std::vector<HostPoint>& points, size_t from, size_t to,
                                   Measure measure) {
    std::vector<double> series{static_cast<double>(measure(points[from]))};
    for (size_t i = from; i < to; ++i)
        series.push_back(series.back() + (importing(points, i)
                                              ? 0.0
                                              : static_cast<double>(measure(points[i + 1])) -
                                                    static_cast<double>(measure(points[i]))));
    return series;
}

// The clocks of the process's progress through [from, to], each from 0 at `from`: its events, when it
// made any between them (the order of its work, whatever a slow phase took), and the time it spent
// outside imports. A framework's start and a model's set-up make most of a short process's events at
// once, which puts the events' marks before the first step that compiles (and grows with it): where the
// rise fell against them changed from run to run of the same trial. Growth counts as late only where it
// is late on each, so a loop whose growth stops for a quarter of its time before it ends (a long
// evaluation, a save) is not called growing: set-up is never called a leak.
std::vector<std::vector<double>> progress_clocks(const std::vector<HostPoint>& points, size_t from,
                                                 size_t to) {
    std::vector<std::vector<double>> clocks;
    if (points[to].events > points[from].events) {
        std::vector<double>& events = clocks.emplace_back();
        for (size_t i = from; i <= to; ++i)
            events.push_back(static_cast<double>(points[i].events - points[from].events));
    }
    std::vector<double>& working = clocks.emplace_back(1, 0.0);
    for (size_t i = from; i < to; ++i)
        working.push_back(
            working.back() +
            (importing(points, i) ? 0.0 : static_cast<double>(points[i + 1].time_ns - points[i].time_ns)));
    return clocks;
}

std::optional<HostRamFacts> host_ram_growth(const ProcessModel& model) {
    const std::vector<HostPoint>& points = model.host.points;
    const HostPoint* end = code_end_host_point(model);
    if (points.size() < 3 || end == nullptr)
        return std::nullopt;
    const size_t to = static_cast<size_t>(end - points.data());
    const size_t from = work_start(model, to);
    if (to <= from + 1)
        return std::nullopt;
    const HostPoint& first = points[from];
    const std::vector<std::vector<double>> clocks = progress_clocks(points, from, to);
    const HostPoint& last = points[to];
    const auto rise = [](double before, double after) { return after > before ? after - before : 0.0; };
    // What a measure rose by through the work, not counting imports, when that is growth.
    auto grows = [&](auto measure) -> std::optional<uint64_t> {
        const std::vector<double> series = counted_series(points, from, to, measure);
        const double total = rise(series.front(), series.back());
        std::vector<double> rises;
        for (size_t i = 0; i + 1 < series.size(); ++i)
            rises.push_back(rise(series[i], series[i + 1]));
        const size_t largest = std::min<size_t>(2, rises.size());
        std::partial_sort(rises.begin(), rises.begin() + static_cast<std::ptrdiff_t>(largest), rises.end(),
                          std::greater<>());
        if (rises[0] + (largest > 1 ? rises[1] : 0.0) > kMaxTwoRisesShare * total ||
            total < static_cast<double>(kMinHostGrowth))
            return std::nullopt;
        for (const std::vector<double>& clock : clocks)
            if (rise(series[point_at(clock, 0.5)], series.back()) < kMinLateHostGrowthShare * total ||
                rise(series[point_at(clock, 0.75)], series.back()) < kMinLastHostGrowthShare * total)
                return std::nullopt;
        return static_cast<uint64_t>(total);
    };
    HostRamFacts facts{HostGrowthCause::Allocations,
                       first,
                       last,
                       0,
                       0,
                       model.code_end_ns.has_value() || end != model.host.last()};
    const HostPoint& middle = points[from + point_at(clocks.back(), 0.5)];
    const bool status = first.has(format::HostField::Status) && last.has(format::HostField::Status) &&
                        middle.has(format::HostField::Status);
    // USS and PSS are not read as a process starts (a forked child's first sample is taken inside fork()):
    // their stretch starts at their first reading.
    const auto stretch_end = points.begin() + static_cast<std::ptrdiff_t>(to);
    const auto proportional_start =
        std::find_if(points.begin() + static_cast<std::ptrdiff_t>(from), stretch_end,
                     [](const HostPoint& point) { return point.has(format::HostField::Proportional); });
    // They are read less often and carried over: they say something about the stretch only when read
    // again after its start.
    const bool proportional =
        proportional_start != stretch_end && last.has(format::HostField::Proportional) &&
        middle.has(format::HostField::Proportional) &&
        last.sample.proportional_time_ns > proportional_start->sample.proportional_time_ns;
    const HostPoint& first_proportional = proportional ? *proportional_start : first;
    const auto growth = [](uint64_t before, uint64_t after) { return after > before ? after - before : 0; };
    const uint64_t rss_growth = growth(first_proportional.rss, last.rss);
    const uint64_t uss_growth = proportional ? growth(first_proportional.sample.uss, last.sample.uss) : 0;
    // A forked child's copies are its own however they came about, at once or over its work: what it
    // copied is memory each worker holds (it starts from its parent's pages, not from an import).
    const auto copied = [&]() -> std::optional<uint64_t> {
        if (proportional && !model.header.parent_trace.empty() && uss_growth >= kMinHostGrowth &&
            static_cast<double>(rss_growth) <= kMaxCopyOnWriteRssShare * static_cast<double>(uss_growth))
            return uss_growth;
        return std::nullopt;
    };
    // Not RSS, which also holds the file pages it maps (a memory-mapped dataset read through), which
    // the kernel takes back when it needs them.
    const auto allocated = [](const HostPoint& point) { return point.allocated(); };
    const auto shmem = [](const HostPoint& point) { return point.sample.rss_shmem; };
    const auto rss = [](const HostPoint& point) { return point.rss; };
    uint64_t raw_growth = 0;
    if (const auto shared = status ? grows(shmem) : std::nullopt) {
        facts.cause = HostGrowthCause::SharedMemory;
        facts.growth = *shared;
        raw_growth = growth(first.sample.rss_shmem, last.sample.rss_shmem);
    } else if (const auto unique = copied()) {
        facts.cause = HostGrowthCause::CopyOnWrite;
        facts.from = first_proportional;
        facts.growth = raw_growth = *unique;
    } else if (const auto kept = status ? grows(allocated) : std::nullopt) {
        facts.growth = *kept;
        raw_growth = growth(first.allocated(), last.allocated());
    } else if (const auto resident = status ? std::nullopt : grows(rss)) {
        facts.growth = *resident;
        raw_growth = rss_growth;
    } else {
        return std::nullopt;
    }
    if (raw_growth > facts.growth &&
        static_cast<double>(raw_growth - facts.growth) >= kMinImportedShare * static_cast<double>(raw_growth))
        facts.while_importing = raw_growth - facts.growth;
    return facts;
}

} // namespace

const char* host_growth_cause_name(HostGrowthCause cause) {
    static constexpr NameTable kNames({{HostGrowthCause::CopyOnWrite, "copy_on_write"},
                                       {HostGrowthCause::Allocations, "allocations"},
                                       {HostGrowthCause::SharedMemory, "shared_memory"}},
                                      HostGrowthCause::Allocations);
    return kNames[cause];
}

const char* leak_cause_name(LeakCause cause) {
    static constexpr NameTable kNames({{LeakCause::Growth, "growth"},
                                       {LeakCause::SpentGraphs, "spent_graphs"},
                                       {LeakCause::KeptForBackward, "kept_for_backward"}},
                                      LeakCause::Growth);
    return kNames[cause];
}

const char* diagnosis_kind_name(DiagnosisKind kind) {
    static constexpr NameTable kNames({{DiagnosisKind::Leak, "leak"},
                                       {DiagnosisKind::CacheGrowth, "cache_growth"},
                                       {DiagnosisKind::OutsideAllocators, "outside_allocators"},
                                       {DiagnosisKind::HostRamGrowth, "host_ram_growth"},
                                       {DiagnosisKind::PoolExhausted, "pool_exhausted"},
                                       {DiagnosisKind::Incomplete, "incomplete"},
                                       {DiagnosisKind::Stable, "stable"}},
                                      DiagnosisKind::Stable);
    return kNames[kind];
}

namespace {

std::optional<PoolFacts> framework_pool(const ProcessModel& model) {
    std::optional<PoolFacts> pool;
    // leak_sites are largest first: the first pool site met is the largest.
    for (const LeakSite& site : model.leak_sites) {
        if (!site.device_pool())
            continue;
        if (!pool) {
            pool.emplace();
            pool->owner = site.pool;
            pool->device = site.device;
            pool->first_ns = site.first_ns;
            const auto device = std::find_if(model.devices.begin(), model.devices.end(),
                                             [&](const DeviceSummary& d) { return d.device == site.device; });
            if (device != model.devices.end())
                pool->capacity = device->capacity;
        }
        pool->bytes += site.bytes;
        pool->regions += site.count;
        pool->first_ns = std::min(pool->first_ns, site.first_ns);
        pool->last_ns = std::max(pool->last_ns, site.last_ns);
    }
    if (pool)
        pool->grew_through_work = model.pool_grew_through_work;
    return pool;
}

std::optional<AllocatorFacts> framework_allocator(const ProcessModel& model,
                                                  const std::optional<PoolFacts>& pool) {
    AllocatorFacts allocator;
    if (pool) {
        allocator.framework = pool->owner;
        allocator.mode = pool->regions > 1 ? AllocatorMode::GrowingPool : AllocatorMode::Pool;
    } else if (model.tensorflow_per_tensor) {
        allocator.framework = PoolOwner::TensorFlow;
        allocator.mode = AllocatorMode::PerTensor;
    } else {
        return std::nullopt;
    }
    allocator.xla = allocator.framework == PoolOwner::TensorFlow && model.tensorflow_xla;
    return allocator;
}

} // namespace

const char* allocator_mode_name(AllocatorMode mode) {
    static constexpr NameTable kNames({{AllocatorMode::Pool, "pool"},
                                       {AllocatorMode::GrowingPool, "growing_pool"},
                                       {AllocatorMode::PerTensor, "per_tensor"}},
                                      AllocatorMode::Pool);
    return kNames[mode];
}

Diagnosis diagnose(const ProcessModel& model) {
    Diagnosis diagnosis;
    diagnosis.pool = framework_pool(model);
    diagnosis.allocator = framework_allocator(model, diagnosis.pool);
    for (const DeviceSummary& device : model.devices) {
        diagnosis.peak_allocated += device.peak_allocated;
        diagnosis.final_allocated += device.final_allocated;
        diagnosis.final_reserved += device.final_reserved;
    }
    if (diagnosis.final_reserved > diagnosis.final_allocated + kMinCacheMention - 1 && model.reports_blocks)
        diagnosis.cached_at_end = diagnosis.final_reserved - diagnosis.final_allocated;
    // Of the out-of-memory failures: another error says nothing of what memory held.
    for (size_t i = 0; i < model.failures.size(); ++i)
        if (model.failures[i].out_of_memory() &&
            (!diagnosis.largest_failure ||
             model.failures[i].bytes > model.failures[*diagnosis.largest_failure].bytes))
            diagnosis.largest_failure = i;

    diagnosis.host_ram = host_ram_growth(model);
    // A leak, at any size: what grows without bound fills any device in the end.
    if (!model.growth_sites.empty()) {
        LeakFacts leak;
        leak.sites = model.growth_sites;
        for (size_t index : leak.sites)
            leak.bytes += model.leak_sites[index].bytes;
        leak.fill = fill_estimate(model, model.leak_sites[leak.sites.front()]);
        if (diagnosis.largest_failure)
            for (const LiveSiteAt& held : model.failures[*diagnosis.largest_failure].top_sites_then)
                for (size_t index : leak.sites)
                    if (site_of(model, held.stack_id) == site_of(model, model.leak_sites[index].stack_id)) {
                        diagnosis.failure_held_by_leak += held.bytes;
                        break;
                    }
        diagnosis.kind = DiagnosisKind::Leak;
        diagnosis.leak = std::move(leak);
    } else if (!model.spent_graphs.empty()) {
        // Its device memory may be a scalar's; what grows is the graph, in host memory, each step.
        LeakFacts leak;
        leak.cause = LeakCause::SpentGraphs;
        for (const SpentGraph& spent : model.spent_graphs) {
            if (std::find(leak.sites.begin(), leak.sites.end(), spent.site) == leak.sites.end())
                leak.sites.push_back(spent.site);
            leak.bytes += model.retainers[spent.snapshot].holders[spent.holder].graph->bytes;
        }
        diagnosis.kind = DiagnosisKind::Leak;
        diagnosis.leak = std::move(leak);
    } else if (!model.kept_for_backward.empty()) {
        // Not growth, but memory no code could use: what forward passes left with their graphs, one per
        // batch they were given (a validation set), however small it was in this run.
        LeakFacts leak;
        leak.cause = LeakCause::KeptForBackward;
        for (const KeptForBackward& kept : model.kept_for_backward) {
            leak.sites.push_back(kept.site);
            leak.bytes += kept.bytes;
        }
        diagnosis.kind = DiagnosisKind::Leak;
        diagnosis.leak = std::move(leak);
    } else if (diagnosis.pool && model.error && says_out_of_memory(*model.error)) {
        // Whatever filled the pool was handed out inside it, where gpuleak cannot see.
        diagnosis.kind = DiagnosisKind::PoolExhausted;
    } else if ((diagnosis.cache = cache_growth(model))) {
        diagnosis.kind = DiagnosisKind::CacheGrowth;
    } else if ((diagnosis.outside = outside_allocators(model))) {
        diagnosis.kind = DiagnosisKind::OutsideAllocators;
    } else if (diagnosis.host_ram) {
        diagnosis.kind = DiagnosisKind::HostRamGrowth;
    } else if (model.exactness.lost()) {
        diagnosis.kind = DiagnosisKind::Incomplete;
    }
    return diagnosis;
}

namespace {

uint64_t monotonic_of(const ProcessModel& model, const HostPoint& point) {
    return model.header.start_monotonic_ns + point.time_ns;
}

bool alive_at(const ProcessModel& model, uint64_t moment) {
    uint64_t end = model.header.start_monotonic_ns + model.duration_ns;
    // Without an end record, its trace ends at its last sample: it died before the next one was due,
    // give or take the sampler's lateness under load (the OOM killer's victim, as memory ran out).
    if (model.header.end.state == format::EndState::Running)
        end += 2 * model.header.counters.timeline_interval_ns;
    return model.header.start_monotonic_ns <= moment && end >= moment;
}

// The process's last sample at or before `moment`.
const HostPoint* point_then(const ProcessModel& model, uint64_t moment) {
    const HostPoint* then = nullptr;
    for (const HostPoint& point : model.host.points)
        if (monotonic_of(model, point) <= moment)
            then = &point;
    return then;
}

// Of the processes of `host` alive at `moment`, the one with the most resident memory then, and that
// memory. Clocks are a machine's own: another machine's processes are not compared.
std::pair<size_t, uint64_t> largest_at(const std::vector<const ProcessModel*>& models,
                                       const std::string& host, uint64_t moment) {
    std::pair<size_t, uint64_t> largest{models.size(), 0};
    for (size_t i = 0; i < models.size(); ++i) {
        const HostPoint* then = models[i]->header.hostname == host && alive_at(*models[i], moment)
                                    ? point_then(*models[i], moment)
                                    : nullptr;
        if (then != nullptr && (largest.first == models.size() || then->rss > largest.second))
            largest = {i, then->rss};
    }
    return largest;
}

// The run's memory at its fullest, with its largest process's index among the models and the moment,
// since that process's start.
struct Fullest {
    RunMemoryFacts facts;
    size_t largest = 0;
    uint64_t largest_time_ns = 0;
};

std::optional<Fullest> run_memory_peak(const std::vector<const ProcessModel*>& models) {
    double worst = -1;
    RunMemoryFacts facts;
    uint64_t moment = 0;
    const std::string* host = nullptr;
    for (const ProcessModel* model : models) {
        for (const HostPoint& point : model->host.points) {
            RunMemoryFacts here;
            if (point.has(format::HostField::CgroupLimit) && point.sample.cgroup_limit_bytes > 0) {
                here.cgroup = true;
                here.used = point.sample.cgroup_bytes;
                here.limit = point.sample.cgroup_limit_bytes;
            } else if (point.has(format::HostField::Available) && model->header.host_memory_bytes > 0) {
                const uint64_t total = model->header.host_memory_bytes;
                here.used = total > point.sample.available_bytes ? total - point.sample.available_bytes : 0;
                here.limit = total;
            } else {
                continue;
            }
            const double share = static_cast<double>(here.used) / static_cast<double>(here.limit);
            if (share > worst) {
                worst = share;
                facts = here;
                moment = monotonic_of(*model, point);
                host = &model->header.hostname;
            }
        }
    }
    if (host == nullptr)
        return std::nullopt;
    const auto [largest, rss] = largest_at(models, *host, moment);
    if (largest == models.size())
        return std::nullopt;
    uint64_t run_start = moment;
    for (const ProcessModel* model : models)
        if (model->header.hostname == *host)
            run_start = std::min(run_start, model->header.start_monotonic_ns);
    facts.run_time_ns = moment - run_start;
    facts.largest_pid = models[largest]->header.pid;
    facts.largest_role = models[largest]->role;
    facts.largest_rss = rss;
    return Fullest{facts, largest, moment - models[largest]->header.start_monotonic_ns};
}

void note_run_memory(const std::vector<const ProcessModel*>& models,
                     const std::vector<Diagnosis*>& diagnoses) {
    const std::optional<Fullest> peak = run_memory_peak(models);
    if (!peak)
        return;
    for (Diagnosis* diagnosis : diagnoses)
        diagnosis->run_memory = peak->facts;
    const RunMemoryFacts& facts = peak->facts;
    if (static_cast<double>(facts.used) >= kMinPressureShare * static_cast<double>(facts.limit))
        diagnoses[peak->largest]->pressure = MemoryPressureFacts{peak->largest_time_ns, facts.cgroup,
                                                                 facts.used, facts.limit, facts.largest_rss};
}

} // namespace

bool killed_unseen(const ProcessEnd& end) {
    if (end.state == format::EndState::Signaled)
        return end.signal == SIGKILL && end.sender.written_by_launcher;
    return end.state == format::EndState::Running && !end.running_when_opened.value_or(false);
}

void diagnose_run(const std::vector<const ProcessModel*>& models, const std::vector<Diagnosis*>& diagnoses) {
    for (size_t i = 0; i < models.size(); ++i) {
        const ProcessModel& model = *models[i];
        const HostPoint* last = model.host.last();
        if (!killed_unseen(model.header.end) || last == nullptr)
            continue;
        KilledFacts killed{*last, model.header.pid, last->rss, model.role};
        const auto [largest, rss] = largest_at(models, model.header.hostname, monotonic_of(model, *last));
        if (largest != models.size() && rss > last->rss) {
            killed.largest_pid = models[largest]->header.pid;
            killed.largest_rss = rss;
            killed.largest_role = models[largest]->role;
        }
        diagnoses[i]->killed = killed;
    }
    note_run_memory(models, diagnoses);
}

} // namespace gpuleak::analyzer
