// The host-memory verdicts on traces made to measure: what grew (copy-on-write, allocations, shared
// memory), that a load before the work is not growth however long it took, the least growth that counts,
// and what the run's processes together say (the memory limit, the process killed).
#include <catch2/catch.hpp>

#include <algorithm>
#include <optional>
#include <tuple>
#include <vector>

#include "in_memory_report.h"
#include "model/diagnosis.h"
#include "read/trace_reader.h"
#include "render/diagnosis_text.h"
#include "render/render_json.h"
#include "render/render_text.h"
#include "trace_builder.h"
#include <fmt/format.h>

using namespace gpuleak::analyzer;
using gpuleak::test::report_of;
using gpuleak::test::TraceBuilder;
using gpuleak::test::TraceLayout;
namespace format = gpuleak::format;

namespace {

constexpr uint64_t kMiB = 1 << 20;
constexpr uint64_t kMillisecond = 1'000'000;
constexpr uint64_t kStart = 1'000'000'000;

struct Sample {
    Sample(uint64_t at_ms, uint64_t rss, std::optional<uint64_t> uss = std::nullopt, uint64_t shmem = 0,
           std::optional<uint64_t> cgroup = std::nullopt)
        : ms(at_ms), rss_mib(rss), uss_mib(uss), shmem_mib(shmem), cgroup_mib(cgroup) {}
    uint64_t ms;
    uint64_t rss_mib;
    std::optional<uint64_t> uss_mib; // read afresh at this sample
    uint64_t shmem_mib;
    std::optional<uint64_t> cgroup_mib; // with a limit of 1 GiB
    std::optional<uint64_t> heap_free_mib;
    uint64_t modules = 0;                  // sys.modules' size
    std::optional<uint64_t> available_mib; // the machine's MemAvailable, of kMachineMiB
    // Live physical memory of the simulated device's virtual memory API (cuMemCreate), a memfd in the
    // process: the trace is then of the simulated device.
    std::optional<uint64_t> simulated_vmm_mib;
    // The process's CUDA events before it (each an allocation freed at once): it is then a CUDA program.
    uint64_t events = 0;
    // Of the events before it, allocations kept, each at an address of its own (a model's weights); the
    // first made.
    uint64_t kept = 0;
};

constexpr uint64_t kMachineMiB = 1024; // the machine's memory, where a trace's samples read what is available

// A process of `samples`, 100 ms apart unless they say otherwise, that ended at the last one; forked from
// `parent_trace` when it is not empty.
TraceBuilder host_trace(const std::vector<Sample>& samples, const std::string& parent_trace = "",
                        int32_t pid = 100, bool ended = true) {
    TraceBuilder builder(TraceLayout{.ring_capacity = 512, .timeline_capacity = 64});
    format::FileHeader& header = builder.header();
    header.start_monotonic_ns = kStart;
    header.flags |= static_cast<uint32_t>(format::HeaderFlag::HostOnly);
    header.pid = pid;
    header.ppid = 1;
    header.rank = -1; // no RANK in its environment
    header.world_size = -1;
    std::snprintf(header.parent_trace, sizeof header.parent_trace, "%s", parent_trace.c_str());
    uint64_t uss = 0;
    uint64_t uss_time = 0;
    uint64_t kept = 0;
    uint64_t transient = 0;
    for (size_t slot = 0; slot < samples.size(); ++slot) {
        const Sample& sample = samples[slot];
        while (header.ring_head < sample.events) {
            format::EventRecord event{};
            const bool keeps = kept < sample.kept;
            event.type = static_cast<uint16_t>(keeps || transient++ % 2 == 0 ? format::EventType::Alloc
                                                                             : format::EventType::Free);
            event.kind = static_cast<uint8_t>(format::MemoryKind::Device);
            event.address = keeps ? 0x8000'0000 + 4096 * kept++ : 0x7000'0000;
            event.size = 4096;
            event.time_ns = kStart + sample.ms * kMillisecond - 1;
            builder.append_event(event);
            header.flags &= ~static_cast<uint32_t>(format::HeaderFlag::HostOnly);
        }
        format::TimelineSample record{};
        record.commit = slot + 1;
        record.time_ns = kStart + sample.ms * kMillisecond;
        record.rss_bytes = sample.rss_mib * kMiB;
        record.host.fields = static_cast<uint32_t>(format::HostField::Status);
        record.host.rss_anon = record.rss_bytes - sample.shmem_mib * kMiB;
        record.host.rss_shmem = sample.shmem_mib * kMiB;
        if (sample.uss_mib) {
            uss = *sample.uss_mib * kMiB;
            uss_time = record.time_ns;
        }
        if (uss_time != 0) {
            record.host.uss = uss;
            record.host.pss = uss;
            record.host.proportional_time_ns = uss_time;
            record.host.fields |= static_cast<uint32_t>(format::HostField::Proportional);
        }
        if (sample.cgroup_mib) {
            record.host.cgroup_bytes = *sample.cgroup_mib * kMiB;
            record.host.cgroup_limit_bytes = 1024 * kMiB;
            record.host.fields |= static_cast<uint32_t>(format::HostField::Cgroup) |
                                  static_cast<uint32_t>(format::HostField::CgroupLimit);
        }
        record.python_modules = sample.modules;
        record.events = sample.events;
        if (sample.available_mib) {
            record.host.available_bytes = *sample.available_mib * kMiB;
            record.host.fields |= static_cast<uint32_t>(format::HostField::Available);
            header.host_memory_bytes = kMachineMiB * kMiB;
        }
        if (sample.simulated_vmm_mib) {
            header.flags &= ~static_cast<uint32_t>(format::HeaderFlag::HostOnly);
            header.flags |= static_cast<uint32_t>(format::HeaderFlag::SimulatedDevice);
            record.kind_bytes[static_cast<int>(format::MemoryKind::VmmPhysical)] =
                *sample.simulated_vmm_mib * kMiB;
            record.device_bytes[0] = *sample.simulated_vmm_mib * kMiB;
        }
        if (sample.heap_free_mib) {
            record.host.heap_free = *sample.heap_free_mib * kMiB;
            record.host.heap_time_ns = record.time_ns;
            record.host.fields |= static_cast<uint32_t>(format::HostField::HeapFree);
        }
        builder.set_timeline(slot, record);
    }
    header.timeline_samples = samples.size();
    if (ended)
        builder.end_exited(0, kStart + samples.back().ms * kMillisecond);
    return builder;
}

ProcessReport report_of_samples(const std::vector<Sample>& samples, const std::string& parent_trace = "") {
    return report_of(TraceReader::parse(host_trace(samples, parent_trace).bytes(), "trace.bin"));
}

// RSS (and USS with it) rising by `mib` in equal steps over ten samples.
std::vector<Sample> steady_growth(uint64_t mib) {
    std::vector<Sample> samples;
    for (uint64_t i = 0; i <= 10; ++i)
        samples.push_back({i * 100, 100 + mib * i / 10, 10 + mib * i / 10});
    return samples;
}

} // namespace

TEST_CASE("memory that rises through the work is growth, from 64 MiB") {
    const ProcessReport grew = report_of_samples(steady_growth(64));
    REQUIRE(grew.diagnosis.host_ram);
    CHECK(grew.diagnosis.host_ram->cause == HostGrowthCause::Allocations);
    CHECK(grew.diagnosis.host_ram->growth == 64 * kMiB);
    CHECK(grew.diagnosis.kind == DiagnosisKind::HostRamGrowth);
    CHECK(report_of_samples(steady_growth(63)).diagnosis.kind == DiagnosisKind::Stable);
    // However many samples the run took: each step of a long one is a small part of what it kept.
    std::vector<Sample> long_run;
    for (uint64_t i = 0; i <= 60; ++i)
        long_run.push_back({i * 100, 100 + 2 * i});
    const ProcessReport long_leak = report_of_samples(long_run);
    REQUIRE(long_leak.diagnosis.host_ram);
    CHECK(long_leak.diagnosis.host_ram->growth == 120 * kMiB);
}

TEST_CASE("freed blocks that malloc keeps in its heap are not growth, and what it does not keep free is") {
    // A loop that frees what each step made: the heap holds the blocks for reuse, the rest stays flat.
    std::vector<Sample> kept_free = steady_growth(200);
    for (uint64_t i = 0; i < kept_free.size(); ++i)
        kept_free[i].heap_free_mib = 200 * i / 10;
    const ProcessReport reused = report_of_samples(kept_free);
    CHECK_FALSE(reused.diagnosis.host_ram);
    CHECK(reused.diagnosis.kind == DiagnosisKind::Stable);
    // Half of it free: the other half is the program's.
    std::vector<Sample> half_free = steady_growth(200);
    for (uint64_t i = 0; i < half_free.size(); ++i)
        half_free[i].heap_free_mib = 100 * i / 10;
    const ProcessReport leaked = report_of_samples(half_free);
    REQUIRE(leaked.diagnosis.host_ram);
    CHECK(leaked.diagnosis.host_ram->growth == 100 * kMiB);
    const std::string text = host_growth_text(leaked.model, *leaked.diagnosis.host_ram);
    CHECK_THAT(text,
               Catch::Contains("less what malloc keeps free for reuse) grew from 100.0 MiB to 200.0 MiB"));
}

TEST_CASE("a Python program's imports are not growth, however long they take against its work") {
    // 300 MiB imported over the first 90 % of the run (torch in a spawned worker), then flat.
    std::vector<Sample> imports;
    for (uint64_t i = 0; i <= 10; ++i) {
        imports.push_back({i * 100, 20 + 300 * std::min<uint64_t>(i, 9) / 9});
        imports.back().modules = 100 + 900 * std::min<uint64_t>(i, 9) / 9;
    }
    const ProcessReport imported = report_of_samples(imports);
    CHECK_FALSE(imported.diagnosis.host_ram);
    // Without the modules to tell the imports by, they look like the work.
    for (Sample& sample : imports)
        sample.modules = 0;
    CHECK(report_of_samples(imports).diagnosis.host_ram);
    // What grows after them is growth, from their end.
    std::vector<Sample> leak_after;
    for (uint64_t i = 0; i <= 20; ++i) {
        leak_after.push_back({i * 100, i <= 4 ? 20 + 50 * i : 220 + 10 * (i - 4)});
        leak_after.back().modules = i <= 4 ? 100 + 225 * i : 1000 + (i == 20 ? 5 : 0);
    }
    const ProcessReport leaked = report_of_samples(leak_after);
    REQUIRE(leaked.diagnosis.host_ram);
    CHECK(leaked.diagnosis.host_ram->from.time_ns == 400 * kMillisecond);
    // Less its first step, which the imports' last may have run into, and its last, in which it imported
    // a few modules more.
    CHECK(leaked.diagnosis.host_ram->growth == 140 * kMiB);
    // Its last samples, taken as it finalizes and exits, do not read sys.modules.
    imports.back().modules = 0;
    for (uint64_t i = 0; i + 1 < imports.size(); ++i)
        imports[i].modules = 100 + 900 * std::min<uint64_t>(i, 9) / 9;
    CHECK_FALSE(report_of_samples(imports).diagnosis.host_ram);
}

TEST_CASE("a Python program's growth is judged to its last sample before teardown, seen or not") {
    // 20 MiB a step, kept in a global list that the interpreter's teardown freed between the last sample
    // and the one at exit, which reads no sys.modules: finalizing was too quick to be seen, or was seen
    // only after that sample.
    std::vector<Sample> samples;
    for (uint64_t i = 0; i <= 10; ++i) {
        samples.push_back({i * 100, 100 + 20 * i});
        samples.back().modules = 100;
    }
    samples.push_back({1050, 30});
    const ProcessReport leaked = report_of_samples(samples);
    REQUIRE(leaked.diagnosis.host_ram);
    CHECK(leaked.diagnosis.host_ram->growth == 200 * kMiB);
    CHECK(leaked.diagnosis.host_ram->to.time_ns == 1000 * kMillisecond);
    // Seen finalizing only after the sample that its teardown already emptied sys.modules for.
    TraceBuilder seen = host_trace(samples);
    format::EventRecord finalizing{};
    finalizing.type = static_cast<uint16_t>(format::EventType::PythonFinalizing);
    finalizing.time_ns = kStart + 1060 * kMillisecond;
    finalizing.device = -2;
    seen.add_notable(finalizing);
    const ProcessReport seen_late = report_of(TraceReader::parse(seen.bytes(), "trace.bin"));
    REQUIRE(seen_late.model.code_end_ns);
    REQUIRE(seen_late.diagnosis.host_ram);
    CHECK(seen_late.diagnosis.host_ram->to.time_ns == 1000 * kMillisecond);
    // A program that is not Python's, or whose sys.modules is never read, ends at its last sample.
    for (Sample& sample : samples)
        sample.modules = 0;
    CHECK_FALSE(report_of_samples(samples).diagnosis.host_ram);
}

TEST_CASE("what imports bring is not growth, to their last and after the sample that counted them") {
    // Fourteen imports to the end of a short script, each followed by 24 MiB, sys.modules' size as
    // CPython 3.11 has it (one import adds nothing: already imported); the last 24 MiB come after the
    // sample that counted its modules. The first sample with 95 % of them is three imports from the end.
    const std::vector<uint64_t> modules = {102, 107, 109, 112, 114, 140, 147, 155, 182,
                                           221, 224, 230, 230, 233, 236, 236, 236};
    std::vector<Sample> samples;
    for (uint64_t i = 0; i < modules.size(); ++i) {
        samples.push_back({i * 100, 20 + 24 * (i <= 13 ? i : 14)});
        samples.back().modules = modules[i];
    }
    const ProcessReport imported = report_of_samples(samples);
    CHECK_FALSE(imported.diagnosis.host_ram);
    CHECK(imported.diagnosis.kind == DiagnosisKind::Stable);
}

TEST_CASE("a leak with an import in its work grows by what it kept between the imports") {
    // 10 MiB a step for 20 steps, and an import of 40 modules bringing 200 MiB halfway.
    std::vector<Sample> samples;
    for (uint64_t i = 0; i <= 20; ++i) {
        samples.push_back({i * 100, 100 + 10 * i + (i > 10 ? 200 : 0)});
        samples.back().modules = i > 10 ? 1040 : 1000;
    }
    gpuleak::analyzer::ReportSet set;
    std::vector<ProcessReport>& reports = set.all();
    reports.push_back(report_of_samples(samples));
    const ProcessReport& leaked = reports.front();
    REQUIRE(leaked.diagnosis.host_ram);
    // Not the step after the import either: its body may run past the sample that counted its modules.
    CHECK(leaked.diagnosis.host_ram->growth == 180 * kMiB);
    CHECK(leaked.diagnosis.host_ram->while_importing == 220 * kMiB);
    const std::string text = host_growth_text(leaked.model, *leaked.diagnosis.host_ram);
    CHECK_THAT(text, Catch::Contains("grew from 100.0 MiB to 500.0 MiB through its work"));
    CHECK_THAT(text, Catch::EndsWith(
                         "Of that, 220.0 MiB came while it imported modules and is not counted as growth."));
    const nlohmann::json json = render_json(set, ReportOptions{});
    CHECK(json["processes"][0]["diagnosis"]["host"]["while_importing_bytes"] == 220 * kMiB);
}

TEST_CASE("one allocation caught between two samples of a short run is not growth") {
    // A script that makes a 300 MiB list in its only step and ends.
    const ProcessReport once =
        report_of_samples({{0, 10, 5}, {100, 160, 155}, {200, 310, 305}, {210, 310, 305}});
    CHECK_FALSE(once.diagnosis.host_ram);
}

TEST_CASE("a load before the work is not growth, however long it took against the work") {
    // 300 MiB loaded over the first 70 % of the run (imports, a dataset), then flat.
    std::vector<Sample> samples;
    for (uint64_t i = 0; i <= 10; ++i)
        samples.push_back(
            {i * 100, 10 + 300 * std::min<uint64_t>(i, 7) / 7, 10 + 300 * std::min<uint64_t>(i, 7) / 7});
    const ProcessReport loaded = report_of_samples(samples);
    CHECK_FALSE(loaded.diagnosis.host_ram);
    CHECK(loaded.diagnosis.kind == DiagnosisKind::Stable);
}

TEST_CASE("a marker set before a Python program's imports does not start its work") {
    // gpuleak.isolated's child sets its marker, an event, before the call that imports the framework:
    // the work starts when the imports are done, as without the marker. Then it leaks 10 MiB a sample.
    std::vector<Sample> samples;
    for (uint64_t i = 0; i <= 20; ++i) {
        Sample sample{i * 100, i <= 4 ? 20 + 50 * i : 220 + 10 * (i - 4)};
        sample.modules = i <= 4 ? 100 + 200 * i : 1000;
        sample.events = 1;
        samples.push_back(sample);
    }
    const ProcessReport leaked = report_of_samples(samples);
    REQUIRE(leaked.diagnosis.host_ram);
    CHECK(leaked.diagnosis.host_ram->from.time_ns == 500 * kMillisecond);
}

TEST_CASE("what a short CUDA program's first step takes after its set-up's events is not growth") {
    // A framework's start and a model's variables make most of the events at once; the first step then
    // compiles (the memory rises by 100 MiB over four samples, with a few events), and the steps after it
    // keep what they have. By events alone the rise comes in the last quarter of the work.
    const auto program = [](const auto& memory_at) {
        std::vector<Sample> samples;
        for (uint64_t i = 0; i <= 15; ++i) {
            Sample sample{i * 100, memory_at(i)};
            sample.events = i <= 5 ? 1 + 20 * i : 101 + 2 * (i - 5);
            samples.push_back(sample);
        }
        return samples;
    };
    const ProcessReport compiled =
        report_of_samples(program([](uint64_t i) { return 100 + 25 * std::clamp<uint64_t>(i, 5, 9) - 125; }));
    CHECK_FALSE(compiled.diagnosis.host_ram);
    // Growth through every step after the set-up is growth on each clock.
    const ProcessReport leaking =
        report_of_samples(program([](uint64_t i) { return 100 + 10 * std::max<uint64_t>(i, 5) - 50; }));
    REQUIRE(leaking.diagnosis.host_ram);
    CHECK(leaking.diagnosis.host_ram->growth == 100 * kMiB);
}

TEST_CASE("what a short process's first step takes before its steps repeat is not growth, whatever it took") {
    // A trial in a process of its own: its model's build keeps 200 allocations over four samples, its first
    // step compiles for most of the run (the memory rises 10 MiB a sample, with no events), and each step
    // then frees what it made (an allocation and its free). By time and by events the rise reaches into the
    // last quarter of the work; the steps after the first are what repeats, and they are judged alone.
    const auto trial = [](uint64_t steps) {
        std::vector<Sample> samples;
        for (uint64_t i = 0; i <= 16 + steps; ++i) {
            Sample sample{i * 100, 100 + 10 * std::max<uint64_t>(i, 1) - 10};
            sample.kept = 200;
            sample.events = std::min<uint64_t>(50 * i, 200) + 2 * (i > 16 ? i - 16 : 0);
            samples.push_back(sample);
        }
        return samples;
    };
    const ProcessReport four_steps = report_of_samples(trial(4));
    CHECK_FALSE(four_steps.diagnosis.host_ram);
    REQUIRE(four_steps.model.first_step_end_ns);
    CHECK(*four_steps.model.first_step_end_ns == 1700 * kMillisecond - 1);
    // Twenty steps that each keep 10 MiB grow, from the first step's end.
    const ProcessReport twenty_steps = report_of_samples(trial(20));
    REQUIRE(twenty_steps.diagnosis.host_ram);
    CHECK(twenty_steps.diagnosis.host_ram->from.time_ns == 1700 * kMillisecond);
    CHECK(twenty_steps.diagnosis.host_ram->growth == 190 * kMiB);
}

TEST_CASE(
    "a forked child whose unique memory grows while its resident memory stays copies its parent's pages") {
    // Its pages were its parent's: resident from the start, its own only as it writes to them.
    const std::vector<Sample> copied = {{0, 500, 1}, {100, 505}, {200, 510, 300}};
    const ProcessReport child = report_of_samples(copied, "/runs/parent.trace");
    REQUIRE(child.diagnosis.host_ram);
    CHECK(child.diagnosis.host_ram->cause == HostGrowthCause::CopyOnWrite);
    CHECK(child.diagnosis.host_ram->growth == 299 * kMiB);
    CHECK_THAT(host_growth_text(child.model, *child.diagnosis.host_ram), Catch::Contains("copy-on-write"));
    // Not a forked child: its unique memory rose as memory it shared with a child that exited became its
    // own again, which is nothing it did.
    CHECK_FALSE(report_of_samples(copied).diagnosis.host_ram);
    // Unique memory not read again since the start says nothing about the stretch.
    const std::vector<Sample> stale = {{0, 500, 1}, {100, 505}, {200, 510}};
    CHECK_FALSE(report_of_samples(stale, "/runs/parent.trace").diagnosis.host_ram);
}

TEST_CASE("resident shared memory that grows is shared-memory tensors not released") {
    std::vector<Sample> samples;
    for (uint64_t i = 0; i <= 10; ++i)
        samples.push_back({i * 100, 100 + 20 * i, 10, 20 * i});
    const ProcessReport report = report_of_samples(samples, "/runs/parent.trace");
    REQUIRE(report.diagnosis.host_ram);
    CHECK(report.diagnosis.host_ram->cause == HostGrowthCause::SharedMemory);
    CHECK(report.diagnosis.host_ram->growth == 200 * kMiB);
}

TEST_CASE("the simulated device's mapped memory, shared memory in the process, is not the host's") {
    std::vector<Sample> samples;
    for (uint64_t i = 0; i <= 10; ++i) {
        Sample sample{i * 100, 100 + 20 * i, 10, 20 * i};
        sample.simulated_vmm_mib = 20 * i;
        samples.push_back(sample);
    }
    const ProcessReport report = report_of_samples(samples, "/runs/parent.trace");
    CHECK_FALSE(report.diagnosis.host_ram);
    CHECK(report.model.host.points.back().sample.rss_shmem == 0);
    CHECK(report.model.host.points.back().rss == 100 * kMiB);
}

TEST_CASE(
    "the run near its memory limit is said of the process with the most memory then, and the killed one "
    "names it") {
    // A worker grew to 700 MiB and was killed at 500 ms, while its parent held 250 MiB: the cgroup then
    // held 950 MiB of its 1 GiB.
    std::vector<Sample> worker_samples;
    for (uint64_t i = 0; i <= 5; ++i)
        worker_samples.push_back({i * 100, 200 + 100 * i, 10 + 100 * i, 0, 450 + 100 * i});
    std::vector<Sample> parent_samples;
    for (uint64_t i = 0; i <= 10; ++i)
        parent_samples.push_back({i * 100, 250, 250, 0, i <= 5 ? 450 + 100 * i : 250});
    const TraceReader parent_trace =
        TraceReader::parse(host_trace(parent_samples, "", 100).bytes(), "parent");
    const TraceReader worker_trace =
        TraceReader::parse(host_trace(worker_samples, "parent", 101, false).bytes(), "worker");
    ProcessReport parent = report_of(parent_trace);
    ProcessReport worker = report_of(worker_trace);
    diagnose_run({&parent.model, &worker.model}, {&parent.diagnosis, &worker.diagnosis});
    CHECK_FALSE(parent.diagnosis.pressure);
    REQUIRE(worker.diagnosis.pressure);
    CHECK(worker.diagnosis.pressure->cgroup);
    CHECK(worker.diagnosis.pressure->used == 950 * kMiB);
    CHECK(worker.diagnosis.pressure->rss == 700 * kMiB);
    CHECK(worker.diagnosis.pressure->time_ns == 500 * kMillisecond); // since the worker's start
    CHECK_THAT(pressure_text(*worker.diagnosis.pressure), Catch::Contains("OOM killer"));
    CHECK_FALSE(parent.diagnosis.killed);
    REQUIRE(worker.diagnosis.killed);
    CHECK(worker.diagnosis.killed->largest_pid == 101);
    CHECK(worker.diagnosis.killed->last.rss == 700 * kMiB);
    CHECK_THAT(killed_text(worker.model, *worker.diagnosis.killed),
               Catch::Contains("No other process of the run held more"));
}

TEST_CASE("without a cgroup limit, the run near the machine's memory is said of its largest process") {
    // No cgroup limit was read: the machine's available memory fell to 60 MiB of 1 GiB at 400 ms, when the
    // worker held 600 MiB and its parent 300 MiB.
    std::vector<Sample> worker_samples;
    std::vector<Sample> parent_samples;
    for (uint64_t i = 0; i <= 6; ++i) {
        Sample worker{i * 100, 200 + 100 * std::min<uint64_t>(i, 4), 10};
        worker.available_mib = i == 4 ? 60 : 500;
        worker_samples.push_back(worker);
        Sample parent{i * 100, 300, 300};
        parent.available_mib = worker.available_mib;
        parent_samples.push_back(parent);
    }
    const TraceReader parent_trace =
        TraceReader::parse(host_trace(parent_samples, "", 100).bytes(), "parent");
    const TraceReader worker_trace =
        TraceReader::parse(host_trace(worker_samples, "parent", 101).bytes(), "worker");
    ProcessReport parent = report_of(parent_trace);
    ProcessReport worker = report_of(worker_trace);
    diagnose_run({&parent.model, &worker.model}, {&parent.diagnosis, &worker.diagnosis});
    CHECK_FALSE(parent.diagnosis.pressure);
    REQUIRE(worker.diagnosis.pressure);
    CHECK_FALSE(worker.diagnosis.pressure->cgroup);
    CHECK(worker.diagnosis.pressure->used == (kMachineMiB - 60) * kMiB);
    CHECK(worker.diagnosis.pressure->limit == kMachineMiB * kMiB);
    CHECK(worker.diagnosis.pressure->rss == 600 * kMiB);
    CHECK_THAT(pressure_text(*worker.diagnosis.pressure),
               Catch::Contains("the machine had 964.0 MiB of its 1.0 GiB in use (94 %)") &&
                   Catch::Contains("OOM killer"));
    // Every process of the run is told the same fullest moment, of the machine's memory.
    REQUIRE(parent.diagnosis.run_memory);
    CHECK_FALSE(parent.diagnosis.run_memory->cgroup);
    CHECK(parent.diagnosis.run_memory->largest_pid == 101);
}

TEST_CASE("the report says when the run's memory was at its fullest and shows each process's samples") {
    // The worker started 200 ms after its parent and peaked 300 ms later, at 600 MiB; the cgroup held
    // 900 MiB of its 1 GiB then, short of the 90 % that is pressure.
    std::vector<Sample> worker_samples;
    for (uint64_t i = 0; i <= 6; ++i)
        worker_samples.push_back(
            {200 + i * 100, i <= 3 ? 300 + 100 * i : 300, 10 + 50 * i, 0, i <= 3 ? 600 + 100 * i : 600});
    std::vector<Sample> parent_samples;
    for (uint64_t i = 0; i <= 10; ++i)
        parent_samples.push_back({i * 100, 300, 300, 0, 600});
    TraceBuilder worker_builder = host_trace(worker_samples, "parent", 101);
    worker_builder.header().start_monotonic_ns += 200 * kMillisecond;
    const TraceReader parent_trace =
        TraceReader::parse(host_trace(parent_samples, "", 100).bytes(), "parent");
    const TraceReader worker_trace = TraceReader::parse(worker_builder.bytes(), "worker");
    gpuleak::analyzer::ReportSet set;
    std::vector<ProcessReport>& reports = set.all();
    reports.push_back(report_of(parent_trace));
    reports.push_back(report_of(worker_trace));
    diagnose_run({&reports[0].model, &reports[1].model}, {&reports[0].diagnosis, &reports[1].diagnosis});
    CHECK_FALSE(reports[1].diagnosis.pressure);

    const std::optional<RunMemoryFacts>& peak = reports[0].diagnosis.run_memory;
    REQUIRE(peak);
    REQUIRE(reports[1].diagnosis.run_memory);
    CHECK(reports[1].diagnosis.run_memory->used == peak->used);
    CHECK(peak->cgroup);
    CHECK(peak->used == 900 * kMiB);
    CHECK(peak->limit == 1024 * kMiB);
    CHECK(peak->run_time_ns == 500 * kMillisecond);
    CHECK(peak->largest_pid == 101);
    CHECK(peak->largest_rss == 600 * kMiB);

    const ReportOptions options;
    const std::string text = render_text(set, options);
    // The paragraph after the processes, the report's last, its lines joined.
    std::string run_line = text.substr(text.find("Run memory"));
    run_line = run_line.substr(0, run_line.find_last_not_of('\n') + 1);
    std::replace(run_line.begin(), run_line.end(), '\n', ' ');
    CHECK_THAT(run_line,
               Catch::Equals("Run memory at its fullest, 0.5 s into the run: the run's memory cgroup "
                             "held 900.0 MiB of its limit of 1.0 GiB (88 %). The process with the most "
                             "resident memory then was pid 101, with 600.0 MiB."));
    // The worker's samples: its start, its peak, its flat stretch once, and its end.
    const std::string worker_text = text.substr(text.find("process 101 "));
    CHECK_THAT(worker_text, Catch::Contains("over time        t        RSS        USS"));
    CHECK_THAT(worker_text, Catch::Contains("      0.0 s  300.0 MiB   10.0 MiB"));
    CHECK_THAT(worker_text, Catch::Contains("      0.3 s  600.0 MiB  160.0 MiB"));
    CHECK_THAT(worker_text, Catch::Contains("      0.6 s  300.0 MiB  310.0 MiB"));
    const nlohmann::json json = render_json(set, options);
    CHECK(json["run"]["memory_peak"]["used_bytes"] == 900 * kMiB);
    CHECK(json["run"]["memory_peak"]["largest_pid"] == 101);
    CHECK(json["run"]["memory_peak"]["t_s"] == 0.5);
}

namespace {

// A process of the run that `host_trace(samples)` makes, started `start_ms` after the parent (pid 100),
// as the command line says, and a new image (not a fork) unless `forked`.
ProcessReport started_process(int32_t pid, uint64_t start_ms, const std::vector<std::string>& command,
                              bool forked = false) {
    std::vector<Sample> samples;
    for (uint64_t ms = start_ms; ms <= start_ms + 500; ms += 100)
        samples.push_back({ms, 100, 50});
    TraceBuilder builder = host_trace(samples, forked ? "parent" : "", pid);
    builder.header().ppid = 100;
    builder.header().start_monotonic_ns = kStart + start_ms * kMillisecond;
    builder.set_command_line(command);
    return report_of(TraceReader::parse(builder.bytes(), fmt::format("trace.{}", pid)));
}

// The function the process ran for multiprocessing, as its sampler records it.
void set_target(TraceBuilder& builder, const char* filename, const char* qualname, int32_t first_line,
                int64_t dataloader_worker_id) {
    format::ProcessTarget& target = builder.header().target;
    target.filename_bytes =
        static_cast<uint32_t>(std::snprintf(target.filename, sizeof target.filename, "%s", filename));
    target.qualname_bytes =
        static_cast<uint32_t>(std::snprintf(target.qualname, sizeof target.qualname, "%s", qualname));
    target.first_line = first_line;
    target.dataloader_worker_id = dataloader_worker_id;
    target.commit = format::kTargetCommit;
}

format::EventRecord fork_record(int32_t child, uint64_t at_ms, format::ForkOrigin origin) {
    format::EventRecord record{};
    record.type = static_cast<uint16_t>(format::EventType::Fork);
    record.address = static_cast<uint64_t>(child);
    record.result = static_cast<int32_t>(origin);
    record.time_ns = kStart + at_ms * kMillisecond;
    return record;
}

} // namespace

TEST_CASE(
    "a rank is torchrun's worker, or a Slurm task that runs the program itself, not what either started") {
    struct Job {
        int32_t rank = -1;
        int32_t local_rank = -1;
        int32_t world_size = -1;
        int32_t node_rank = -1;
        int32_t slurm_task = -1;
        int32_t slurm_local_task = -1;
        int32_t slurm_tasks = -1;
    };
    // A process of the job, started (or, with `forked`, forked) by `ppid` at `start_ms`.
    const auto process = [](int32_t pid, int32_t ppid, uint64_t start_ms, const Job& job,
                            bool forked = false) {
        TraceBuilder builder = host_trace({{start_ms, 100, 50}, {start_ms + 100, 100, 50}},
                                          forked ? fmt::format("trace.{}", ppid) : "", pid);
        format::FileHeader& header = builder.header();
        header.ppid = ppid;
        header.start_monotonic_ns = kStart + start_ms * kMillisecond;
        header.rank = job.rank;
        header.local_rank = job.local_rank;
        header.world_size = job.world_size;
        header.node_rank = job.node_rank;
        header.slurm_task = job.slurm_task;
        header.slurm_local_task = job.slurm_local_task;
        header.slurm_tasks = job.slurm_tasks;
        ProcessReport report = report_of(TraceReader::parse(builder.bytes(), "trace"));
        report.model.path = fmt::format("trace.{}", pid); // what a forked child names as its parent's
        return report;
    };
    const Job srun_task{.node_rank = 1, .slurm_task = 3, .slurm_local_task = 1, .slurm_tasks = 8};
    const Job torchrun_agent{.node_rank = 1, .slurm_task = 1, .slurm_local_task = 0, .slurm_tasks = 2};
    Job torchrun_worker = torchrun_agent;
    torchrun_worker.rank = 5;
    torchrun_worker.local_rank = 1;
    torchrun_worker.world_size = 8;
    gpuleak::analyzer::ReportSet set;
    std::vector<ProcessReport>& reports = set.all();
    reports.reserve(5);
    reports.push_back(process(100, 1, 0, srun_task));
    reports.push_back(process(101, 100, 10, srun_task, true)); // its DataLoader's worker
    reports.push_back(process(200, 1, 0, torchrun_agent));
    reports.push_back(process(201, 200, 10, torchrun_worker));
    reports.push_back(process(300, 1, 0, Job{.slurm_task = 0, .slurm_local_task = 0, .slurm_tasks = 1}));
    std::vector<ProcessModel*> models;
    models.reserve(reports.size());
    for (ProcessReport& report : reports)
        models.push_back(&report.model);
    assign_roles(models);
    const ProcessRole& task = reports[0].model.role;
    CHECK(task.kind == RoleKind::Rank);
    CHECK(std::tuple(task.rank, task.local_rank, task.world_size, task.node_rank) == std::tuple(3, 1, 8, 1));
    CHECK(role_text(task) == "rank 3 of 8");
    CHECK(reports[1].model.role.kind != RoleKind::Rank);
    CHECK(reports[2].model.role.kind == RoleKind::Program);
    CHECK(reports[2].model.role.node_rank == 1);
    const ProcessRole& worker = reports[3].model.role;
    CHECK(worker.kind == RoleKind::Rank);
    CHECK(std::tuple(worker.rank, worker.local_rank, worker.world_size) == std::tuple(5, 1, 8));
    // A job of one task has no ranks.
    CHECK(reports[4].model.role.kind == RoleKind::Program);
}

TEST_CASE("a DataLoader's spawned workers are numbered from 0, whatever else its frames started") {
    // A parent that had not used CUDA (no stacks) iterated a loader of the spawn method: starting the
    // first worker started multiprocessing's resource tracker, and a dataset ran a tool. Each was a
    // vfork child, recorded at its exec with the DataLoader's frames on the stack.
    const std::vector<std::string> spawn_main = {
        "python", "-c", "from multiprocessing.spawn import spawn_main; spawn_main()"};
    std::vector<Sample> parent_samples;
    for (uint64_t i = 0; i <= 20; ++i)
        parent_samples.push_back({i * 100, 300, 300});
    TraceBuilder parent_builder = host_trace(parent_samples, "", 100);
    parent_builder.add_notable(fork_record(200, 100, format::ForkOrigin::DataLoader));
    parent_builder.add_notable(fork_record(201, 110, format::ForkOrigin::DataLoader));
    parent_builder.add_notable(fork_record(202, 300, format::ForkOrigin::DataLoader));
    parent_builder.add_notable(fork_record(203, 700, format::ForkOrigin::DataLoader));
    gpuleak::analyzer::ReportSet set;
    std::vector<ProcessReport>& reports = set.all();
    reports.push_back(report_of(TraceReader::parse(parent_builder.bytes(), "parent")));
    reports.push_back(started_process(
        200, 105, {"python", "-B", "-c", "from multiprocessing.resource_tracker import main;main(7)"}));
    reports.push_back(started_process(201, 115, spawn_main));
    reports.push_back(started_process(202, 305, spawn_main));
    reports.push_back(started_process(203, 705, {"/usr/bin/identify", "image.png"}));
    std::vector<ProcessModel*> models;
    for (ProcessReport& report : reports)
        models.push_back(&report.model);
    assign_roles(models);
    CHECK(reports[0].model.role.kind == RoleKind::Program);
    CHECK(reports[1].model.role.kind == RoleKind::ResourceTracker);
    for (size_t i : {2, 3}) {
        CHECK(reports[i].model.role.kind == RoleKind::DataLoaderWorker);
        CHECK(reports[i].model.role.start_method == StartMethod::Spawn);
        CHECK(reports[i].model.role.parent == 0);
    }
    CHECK(reports[2].model.role.worker_id == 0);
    CHECK(reports[3].model.role.worker_id == 1);
    CHECK(role_text(reports[3].model.role) == "DataLoader worker 1 (spawn)");
    // The tool is named by its command line, not as a worker.
    CHECK(reports[4].model.role.kind == RoleKind::Program);
}

TEST_CASE("two DataLoaders' workers alive together have the ids they read from their own frames") {
    // zip(images, labels): two loaders of two workers each, started on one line and read side by side.
    // Told by the siblings alive at its fork, the second loader's workers would number on as 2 and 3.
    std::vector<Sample> parent_samples;
    for (uint64_t i = 0; i <= 20; ++i)
        parent_samples.push_back({i * 100, 300, 300});
    TraceBuilder parent_builder = host_trace(parent_samples, "", 100);
    for (int32_t child = 200; child < 204; ++child)
        parent_builder.add_notable(fork_record(child, 100 + 10 * static_cast<uint64_t>(child - 200),
                                               format::ForkOrigin::DataLoader));
    gpuleak::analyzer::ReportSet set;
    std::vector<ProcessReport>& reports = set.all();
    reports.push_back(report_of(TraceReader::parse(parent_builder.bytes(), "parent")));
    reports.back().model.path = "parent";
    const char* loop = "/venv/lib/python3.12/site-packages/torch/utils/data/_utils/worker.py";
    // The last one had not reached its loop when it ended: no id of its own.
    const int64_t read_ids[] = {0, 1, 0, -1};
    for (int32_t child = 200; child < 204; ++child) {
        std::vector<Sample> samples;
        for (uint64_t ms = 105 + 10 * static_cast<uint64_t>(child - 200); ms <= 1500; ms += 100)
            samples.push_back({ms, 100, 50});
        TraceBuilder builder = host_trace(samples, "parent", child);
        builder.header().ppid = 100;
        builder.header().start_monotonic_ns = kStart + samples.front().ms * kMillisecond;
        if (read_ids[child - 200] >= 0)
            set_target(builder, loop, "_worker_loop", 228, read_ids[child - 200]);
        reports.push_back(report_of(TraceReader::parse(builder.bytes(), "worker")));
        reports.back().model.path = fmt::format("trace.{}", child);
    }
    std::vector<ProcessModel*> models;
    for (ProcessReport& report : reports)
        models.push_back(&report.model);
    assign_roles(models);
    std::vector<std::optional<int>> ids;
    for (size_t i = 1; i < reports.size(); ++i) {
        CHECK(reports[i].model.role.kind == RoleKind::DataLoaderWorker);
        ids.push_back(reports[i].model.role.worker_id);
    }
    CHECK(ids == std::vector<std::optional<int>>{0, 1, 0, 3});
    const std::optional<gpuleak::analyzer::ProcessTarget>& target = reports[2].model.header.target;
    REQUIRE(target);
    CHECK(target->filename == loop);
    CHECK(target->qualname == "_worker_loop");
    CHECK(target->first_line == 228);
    CHECK(target->dataloader_worker_id == 1);
    CHECK_FALSE(reports[4].model.header.target);
}
