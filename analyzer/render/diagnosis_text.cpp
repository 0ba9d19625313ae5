#include "diagnosis_text.h"

#include <fmt/format.h>

namespace gpuleak::analyzer {

namespace {

std::string bytes(uint64_t value) {
    return human_bytes(static_cast<double>(value));
}

std::string failure_sentence(const ProcessModel& model, const Diagnosis& diagnosis) {
    if (!diagnosis.largest_failure)
        return "";
    const FailureSummary& largest = model.failures[*diagnosis.largest_failure];
    const std::string free_then =
        largest.free_bytes ? fmt::format(" with {} free", bytes(*largest.free_bytes)) : std::string();
    const std::string held = largest.reserved_then
                                 ? fmt::format(" while {} was reserved there", bytes(*largest.reserved_then))
                                 : std::string();
    // A cap of the allocator's own (PyTorch's set_per_process_memory_fraction) with the device not full.
    const char* refused =
        largest.allocator_refused && largest.failed_cuda_allocations == 0
            ? " (the allocator refused it under a limit of its own: no CUDA allocation failed)"
            : "";
    return fmt::format(
        " {} allocation{} failed (out of memory); the largest asked for {} on device {}{}{}{}.",
        model.failures.size(), model.failures.size() == 1 ? "" : "s", bytes(largest.bytes), largest.device,
        free_then, held, refused);
}

// When the survivors were made: through which markers, or which share of the program's work.
std::string made_through(const ProcessModel& model, const LeakSite& site) {
    if (site.marker_range && site.marker_range->first != site.marker_range->second)
        return fmt::format("from {} to {}", marker_interval_name(model, site.marker_range->first),
                           marker_interval_name(model, site.marker_range->second));
    return fmt::format("through {:.0f}% of the program's work (between {:.1f} s and {:.1f} s)",
                       100 * site.program_share, seconds_of(site.first_ns), seconds_of(site.last_ns));
}

std::string fill_sentence(const LeakSite& site, const FillEstimate& fill) {
    const std::string each = human_bytes(static_cast<double>(site.bytes) / static_cast<double>(site.count));
    const std::string more = fmt::format("{:.0f} more such allocations", fill.allocations);
    if (site.bytes_per_second <= 0)
        return fmt::format(" At {} per allocation, the {} still free on device {} would be gone after {}.",
                           each, bytes(fill.free_bytes), fill.device, more);
    return fmt::format(
        " At the rate it grew ({}/s), the {} still free on device {} would be gone in {} ({}).",
        human_bytes(site.bytes_per_second), bytes(fill.free_bytes), fill.device, human_duration(fill.seconds),
        more);
}

std::string leak_text(const ProcessModel& model, const LeakFacts& leak, StackFrames& stacks) {
    const LeakSite& top = model.leak_sites[leak.sites.front()];
    const std::string sites =
        leak.sites.size() == 1 ? std::string() : fmt::format(" at {} sites", leak.sites.size());
    const std::string of_it =
        leak.sites.size() == 1 ? std::string() : fmt::format(", {} of it", bytes(top.bytes));
    return fmt::format(
        "Memory the program holds kept growing: {} still alive was made {}{}{}, in {} allocation{} ({} each) "
        "from {}.{} That is a real leak: the program keeps references to memory it no longer needs (a list "
        "that grows every iteration, an unbounded cache). Emptying the allocator's cache will not help; fix "
        "the code that keeps them.",
        bytes(leak.bytes), made_through(model, top), sites, of_it, top.count, top.count == 1 ? "" : "s",
        human_bytes(static_cast<double>(top.bytes) / static_cast<double>(top.count)),
        stacks.describe(top.stack_id), leak.fill ? fill_sentence(top, *leak.fill) : std::string());
}

std::string incomplete_text(const Exactness& exactness) {
    std::string lost;
    if (exactness.untracked > 0)
        lost = fmt::format("{} allocation{} could not be recorded (gpuleak had no memory left for them), so "
                           "the totals are short by their bytes",
                           exactness.untracked, exactness.untracked == 1 ? "" : "s");
    if (const SpilledCount unattributed = exactness.unattributed(); unattributed.count > 0)
        lost += fmt::format("{}{} of the allocations live at the end ({}) were counted without the line that "
                            "made them (more sites than the trace has room for)",
                            lost.empty() ? "" : "; ", unattributed.count, bytes(unattributed.bytes));
    return fmt::format("No verdict: {}. A leak among them cannot be ruled out; run again with a larger "
                       "GPULEAK_MAX_MB.",
                       lost);
}

} // namespace

std::vector<std::string> exactness_notes(const ProcessModel& model) {
    const Exactness& exactness = model.exactness;
    std::vector<std::string> notes;
    if (exactness.untracked > 0)
        notes.push_back(fmt::format("{} allocation{} could not be recorded (gpuleak had no memory left for "
                                    "them): the totals, the sites and the timeline are short by their bytes.",
                                    exactness.untracked, exactness.untracked == 1 ? "" : "s"));
    std::string which;
    for (const auto& [kind, spilled] : exactness.spilled_by_kind)
        if (kind != format::MemoryKind::None)
            which += fmt::format("{}{} ({})", which.empty() ? "" : ", ", allocations_of(kind, spilled.count),
                                 bytes(spilled.bytes));
    if (!which.empty())
        notes.push_back(fmt::format(
            "{} live at the end found no slot of their own in the trace's live table ({} slots): they are "
            "counted by the line that made them, so the totals, the sites and their bytes are exact, but "
            "their times are those of the stretch of the run they were made in, and they are not in a "
            "snapshot export. A larger GPULEAK_MAX_MB keeps them one by one.",
            which, exactness.live_capacity));
    if (const SpilledCount unattributed = exactness.unattributed(); unattributed.count > 0)
        notes.push_back(
            fmt::format("{} allocations ({}) live at the end are in the totals but in no site and "
                        "not in the timeline: more sites spilled than the trace has room for.",
                        unattributed.count, bytes(unattributed.bytes)));
    if (exactness.stacks_dropped > 0)
        notes.push_back(
            fmt::format("{} call stack{} did not fit in the trace: the allocations made there are "
                        "shown together, with no stack. A larger GPULEAK_MAX_MB keeps them.",
                        exactness.stacks_dropped, exactness.stacks_dropped == 1 ? "" : "s"));
    if (exactness.notable_dropped > 0)
        notes.push_back(
            fmt::format("The last {} failures, markers, forks and notebook cells did not fit in the "
                        "trace: what they would say is missing. A larger GPULEAK_MAX_MB keeps them.",
                        exactness.notable_dropped));
    return notes;
}

std::string allocations_of(format::MemoryKind kind, uint64_t count) {
    const char* plural = count == 1 ? "" : "s";
    if (kind == format::MemoryKind::Block)
        return fmt::format("{} block{}", count, plural);
    return fmt::format("{} {} allocation{}", count, format::kind_name(kind), plural);
}

std::string marker_interval_name(const ProcessModel& model, int index) {
    return index < 0 ? std::string("the start") : model.markers[static_cast<size_t>(index)].label;
}

std::string human_duration(double seconds) {
    if (seconds < 1)
        return "under a second";
    if (seconds < 120)
        return fmt::format("about {:.0f} s", seconds);
    if (seconds < 2 * 3600)
        return fmt::format("about {:.1f} min", seconds / 60);
    if (seconds < 2 * 86400)
        return fmt::format("about {:.1f} h", seconds / 3600);
    return fmt::format("about {:.1f} days", seconds / 86400);
}

std::string diagnosis_text(const ProcessModel& model, const Diagnosis& diagnosis, StackFrames& stacks) {
    const std::string failures = failure_sentence(model, diagnosis);
    switch (diagnosis.kind) {
    case DiagnosisKind::Leak:
        return leak_text(model, *diagnosis.leak, stacks) + failures;
    case DiagnosisKind::CacheGrowth: {
        const CacheFacts& cache = *diagnosis.cache;
        return fmt::format(
            "Allocated memory peaked at {} ({} at the end), but the caching allocator reserved up to {} on "
            "device "
            "{}, more than the program ever had allocated at once, and still holds {} of cached, possibly "
            "fragmented, blocks. This is not a leak. torch.cuda.empty_cache() gives unused cached memory "
            "back; "
            "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True reduces fragmentation.{}",
            bytes(cache.peak_allocated), bytes(cache.final_allocated), bytes(cache.peak_reserved),
            cache.device, bytes(cache.final_reserved - cache.final_allocated), failures);
    }
    case DiagnosisKind::OutsideAllocators: {
        const OutsideFacts& outside = *diagnosis.outside;
        return fmt::format(
            "The driver reports up to {} of device {} in use, but this process obtained at most {} through "
            "the "
            "allocation calls gpuleak sees: {} is held outside the allocators. That is CUDA contexts (each "
            "takes "
            "hundreds of MiB), libraries that allocate by other means (cuBLAS and cuDNN workspaces, NCCL "
            "buffers), or other processes on the same GPU, such as DataLoader workers that initialised CUDA. "
            "Look for other processes in nvidia-smi and keep CUDA out of worker processes.{}",
            bytes(outside.used_by_driver), outside.device, bytes(outside.obtained),
            bytes(outside.used_by_driver - outside.obtained), failures);
    }
    case DiagnosisKind::HostRamGrowth: {
        const HostRamFacts& host = *diagnosis.host_ram;
        return fmt::format(
            "GPU memory is steady but host memory (RSS) grew from {} to {}{}: the leak, if any, is "
            "in host RAM (tensors kept on the CPU, DataLoader workers' copies).{}",
            bytes(host.first_rss), bytes(host.last_rss),
            host.before_finalizing ? " before Python finalized" : "", failures);
    }
    case DiagnosisKind::Incomplete:
        return incomplete_text(model.exactness) + failures;
    case DiagnosisKind::Stable:
        break;
    }
    const std::string cached = diagnosis.cached_at_end > 0
                                   ? fmt::format(" ({} of it held in the allocator's cache for reuse)",
                                                 bytes(diagnosis.cached_at_end))
                                   : std::string();
    return fmt::format(
        "No sign of a leak: allocated memory peaked at {} and ended at {}; reserved ended at {}{}.{}",
        bytes(diagnosis.peak_allocated), bytes(diagnosis.final_allocated), bytes(diagnosis.final_reserved),
        cached, failures);
}

} // namespace gpuleak::analyzer
