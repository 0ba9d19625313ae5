#include "render/diagnosis_text.h"

#include <algorithm>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <fmt/format.h>

#include "common/name_table.h"
#include "common/printable.h"
#include "render/byte_sizes.h"
#include "render/cuda_errors.h"
#include "report/stack_view.h"

namespace gpuleak::analyzer {

namespace {

// The allocations that failed for another reason than memory, a sentence of their own.
std::string other_failures_sentence(const ProcessModel& model) {
    std::vector<int32_t> errors;
    size_t count = 0;
    for (const FailureSummary& failure : model.failures) {
        if (failure.out_of_memory())
            continue;
        ++count;
        if (std::find(errors.begin(), errors.end(), failure.error) == errors.end())
            errors.push_back(failure.error);
    }
    if (count == 0)
        return "";
    std::string named;
    for (int32_t error : errors) {
        const std::string meaning = cuda_error_meaning(error);
        named += fmt::format("{}error {}{}", named.empty() ? "" : ", ", error,
                             meaning.empty() ? std::string() : " (" + meaning + ")");
    }
    return fmt::format(" {} allocation{} failed for another reason than memory: {}.", count,
                       count == 1 ? "" : "s", named);
}

std::string failure_sentence(const ProcessModel& model, const Diagnosis& diagnosis) {
    if (!diagnosis.largest_failure)
        return other_failures_sentence(model);
    const FailureSummary& largest = model.failures[*diagnosis.largest_failure];
    const auto out_of_memory = static_cast<size_t>(
        std::count_if(model.failures.begin(), model.failures.end(),
                      [](const FailureSummary& failure) { return failure.out_of_memory(); }));
    const std::string free_then =
        largest.free_bytes ? fmt::format(" with {} free", human_bytes(*largest.free_bytes)) : std::string();
    const std::string held = largest.reserved_then ? fmt::format(" while {} was reserved there",
                                                                 human_bytes(*largest.reserved_then))
                                                   : std::string();
    // A cap of the allocator's own (PyTorch's set_per_process_memory_fraction) with the device not full.
    const char* refused =
        largest.allocator_refused && largest.failed_cuda_allocations == 0
            ? " (the allocator refused it under a limit of its own: no CUDA allocation failed)"
            : "";
    const std::string by_leak =
        diagnosis.failure_held_by_leak > 0
            ? fmt::format(", {} of it at the sites that kept growing, by the program's earlier work",
                          human_bytes(diagnosis.failure_held_by_leak))
            : std::string();
    return fmt::format(
        " {} allocation{} failed (out of memory); the largest asked for {} on device {}{}{}{}{}.{}",
        out_of_memory, out_of_memory == 1 ? "" : "s", human_bytes(largest.bytes), largest.device, free_then,
        held, by_leak, refused, other_failures_sentence(model));
}

// When the survivors were made: through which markers, or which share of the program's work.
std::string made_through(const ProcessModel& model, const LeakSite& site) {
    if (site.marker_range && site.marker_range->first != site.marker_range->second)
        return fmt::format("from {} to {}", marker_interval_name(model, site.marker_range->first),
                           marker_interval_name(model, site.marker_range->second));
    // As precise as the site's own line (render_text's when_made): a loop of a tenth of a second is not
    // "3.0 s to 3.0 s".
    return fmt::format("through {:.0f}% of the program's work ({:.2f} s to {:.2f} s)",
                       100 * site.program_share, seconds_of(site.first_ns), seconds_of(site.last_ns));
}

// A large count as it is read aloud: "640", "33 million".
std::string rough_count(double count) {
    constexpr std::pair<double, const char*> kScales[] = {
        {1e9, "billion"}, {1e6, "million"}, {1e3, "thousand"}};
    if (count < 1e4)
        return fmt::format("{:.0f}", count);
    for (const auto& [scale, name] : kScales)
        if (count >= scale)
            return count < 10 * scale ? fmt::format("{:.1f} {}", count / scale, name)
                                      : fmt::format("{:.0f} {}", count / scale, name);
    return fmt::format("{:.0f}", count);
}

std::string fill_sentence(const LeakSite& site, const FillEstimate& fill) {
    if (site.bytes_per_second <= 0)
        return fmt::format(" The {} free on device {} would last {} more of them.",
                           human_bytes(fill.free_bytes), fill.device, rough_count(fill.allocations));
    return fmt::format(" It grew {}/s: the {} free on device {} would be gone in {}.",
                       human_bytes(site.bytes_per_second), human_bytes(fill.free_bytes), fill.device,
                       human_duration(fill.seconds));
}

// The record of what held the memory: "gpuleak.why() at 3.21 s (out of memory on device 0)".
std::string why_record(const RetainerSnapshot& snapshot) {
    return fmt::format("gpuleak.why() at {:.2f} s ({})", seconds_of(snapshot.time_ns),
                       printable(snapshot.label));
}

// `text` with its first letter a capital, as a sentence starts.
std::string sentence(std::string text) {
    if (!text.empty() && text.front() >= 'a' && text.front() <= 'z')
        text.front() = static_cast<char>(text.front() - 'a' + 'A');
    return text;
}

// Who keeps the leak's top site and what to change, where a record of what held the memory names it;
// else where to look.
std::string keeper_sentence(const ProcessModel& model, const LeakSite& top) {
    // TensorFlow offers no call that empties its allocator's cache: advice against one would puzzle.
    const bool tensorflow = model.tensorflow_per_tensor || model.tensorflow_xla;
    const char* no_cache_helps = tensorflow ? "" : " Emptying the allocator's cache will not help.";
    if (top.held_by.empty())
        return fmt::format("Find what keeps them: a list that grows every step, an unbounded cache.{}",
                           no_cache_helps);
    const HeldBy& by = top.held_by.front();
    const RetainerSnapshot& snapshot = model.retainers[by.snapshot];
    const Retainer& holder = snapshot.holders[by.holder];
    const std::string advice =
        holder.advice.empty() ? std::string() : " " + sentence(printable(holder.advice.front())) + ".";
    return fmt::format("{} found {} of it held by {}.{}{}", why_record(snapshot), human_bytes(by.bytes),
                       retainer_name(holder), advice, no_cache_helps);
}

std::string kept_for_backward_text(const ProcessModel& model, const LeakFacts& leak, StackFrames& stacks) {
    const KeptForBackward& kept = model.kept_for_backward.front();
    const LeakSite& top = model.leak_sites[kept.site];
    const Retainer& holder = model.retainers[kept.snapshot].holders[kept.holder];
    const std::string sites =
        leak.sites.size() == 1 ? std::string() : fmt::format(" at {} sites", leak.sites.size());
    const std::string of_it =
        leak.sites.size() == 1 ? std::string("It was") : fmt::format("{} of it was", human_bytes(kept.bytes));
    return fmt::format(
        "As the program ended, the autograd graphs of {} forward passes held {}{}: tensors saved for a "
        "backward() that never ran. {} made at {} and held by {}. Outputs of forward passes run outside "
        "torch.no_grad() keep their activations, one pass per batch. Compute what is only read (validation, "
        "metrics, predictions) under `with torch.no_grad():` or `torch.inference_mode()`, or keep "
        "`.detach()`ed results. Emptying the allocator's cache will not help.",
        holder.graph->passes, human_bytes(leak.bytes), sites, of_it, printable(stacks.describe(top.stack_id)),
        retainer_name(holder));
}

std::string spent_graphs_text(const ProcessModel& model, StackFrames& stacks) {
    const SpentGraph& spent = model.spent_graphs.front();
    const RetainerSnapshot& snapshot = model.retainers[spent.snapshot];
    const Retainer& holder = snapshot.holders[spent.holder];
    const KeptGraph& graph = *holder.graph;
    const LeakSite& site = model.leak_sites[spent.site];
    return fmt::format(
        "{}, keeps the autograd graphs of {} backward passes ({} nodes), {}. backward() already ran through "
        "them: they can never be used again. A running total of losses (`total += loss`) keeps one more "
        "graph "
        "each step, in host memory, however little device memory the tensor holds ({} at `{}`, made at {}). "
        "Add `loss.item()` (a number) or `loss.detach()`, not `loss`.",
        retainer_name(holder), graph.spent_passes, graph.nodes, "per " + why_record(snapshot),
        human_bytes(graph.bytes), printable(graph.path), printable(stacks.describe(site.stack_id)));
}

std::string leak_text(const ProcessModel& model, const LeakFacts& leak, StackFrames& stacks) {
    if (leak.cause == LeakCause::SpentGraphs)
        return spent_graphs_text(model, stacks);
    if (leak.cause == LeakCause::KeptForBackward)
        return kept_for_backward_text(model, leak, stacks);
    const LeakSite& top = model.leak_sites[leak.sites.front()];
    // What the program's exit freed was still held as its code ended.
    const char* alive = model.code_end_ns ? "still held as its code ended" : "still alive";
    const std::string made =
        fmt::format("{} allocation{} of {}", top.count, top.count == 1 ? "" : "s",
                    human_bytes(static_cast<double>(top.bytes) / static_cast<double>(top.count)));
    const std::string what =
        leak.sites.size() == 1
            ? fmt::format("Memory kept growing at {}: {} ({}), made {}, {} {}.",
                          printable(stacks.describe(top.stack_id)), made, human_bytes(top.bytes),
                          made_through(model, top), top.count == 1 ? "was" : "were", alive)
            : fmt::format("Memory kept growing at {} sites: {} made {} was {}. The most, {}, is {} at {}.",
                          leak.sites.size(), human_bytes(leak.bytes), made_through(model, top), alive,
                          human_bytes(top.bytes), made, printable(stacks.describe(top.stack_id)));
    return what + (leak.fill ? fill_sentence(top, *leak.fill) : std::string()) + " " +
           keeper_sentence(model, top);
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
                            lost.empty() ? "" : "; ", unattributed.count, human_bytes(unattributed.bytes));
    if (exactness.reentry_dropped > 0)
        lost += fmt::format("{}{} allocations, frees or failures made from a signal handler that interrupted "
                            "gpuleak were dropped",
                            lost.empty() ? "" : "; ", exactness.reentry_dropped);
    const bool short_of_room = exactness.untracked > 0 || exactness.unattributed().count > 0;
    return fmt::format("No verdict: {}. A leak among them cannot be ruled out{}.", lost,
                       short_of_room ? "; run again with a larger GPULEAK_MAX_MB" : "");
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
                                 human_bytes(spilled.bytes));
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
                        unattributed.count, human_bytes(unattributed.bytes)));
    if (exactness.stacks_dropped > 0)
        notes.push_back(
            fmt::format("{} call stack{} did not fit in the trace: the allocations made there are "
                        "shown together, with no stack. A larger GPULEAK_MAX_MB keeps them.",
                        exactness.stacks_dropped, exactness.stacks_dropped == 1 ? "" : "s"));
    if (exactness.reentry_dropped > 0)
        notes.push_back(fmt::format("{} allocations, frees or failures were dropped: the program called "
                                    "gpuleak's C API from a signal "
                                    "handler that interrupted gpuleak on the same thread, which would have "
                                    "waited forever. The totals "
                                    "and the sites may be off by them.",
                                    exactness.reentry_dropped));
    if (exactness.reentry_dropped_notes > 0)
        notes.push_back(fmt::format("{} markers or source names made from a signal handler that interrupted "
                                    "gpuleak on the same thread were dropped.",
                                    exactness.reentry_dropped_notes));
    if (exactness.notable_dropped > 0)
        notes.push_back(fmt::format(
            "The last {} failures, markers, forks, notebook cells and thread starts did not fit in the "
            "trace: what they would say is missing. A larger GPULEAK_MAX_MB keeps them.",
            exactness.notable_dropped));
    if (exactness.strings_dropped > 0)
        notes.push_back(
            fmt::format("The text of {} marker labels, notebook cells or records of what held the "
                        "memory (gpuleak.why()) did not fit in the trace: they are missing. A larger "
                        "GPULEAK_MAX_MB keeps them.",
                        exactness.strings_dropped));
    return notes;
}

std::string allocations_of(format::MemoryKind kind, uint64_t count) {
    const char* plural = count == 1 ? "" : "s";
    if (kind == format::MemoryKind::Block)
        return fmt::format("{} block{}", count, plural);
    // In words: "pinned host", not the JSON's "pinned_host".
    std::string name = format::kind_name(kind);
    std::replace(name.begin(), name.end(), '_', ' ');
    return fmt::format("{} {} allocation{}", count, name, plural);
}

std::string marker_interval_name(const ProcessModel& model, int index) {
    return index < 0 ? std::string("the start") : printable(model.markers[static_cast<size_t>(index)].label);
}

std::string retainer_name(const Retainer& holder) {
    return printable(holder.own.empty() ? holder.root : holder.root + ": " + holder.own);
}

std::string short_command(const ProcessModel& model) {
    std::string text;
    for (const std::string& argument : model.header.command_line) {
        const std::string shown = text.empty() ? std::filesystem::path(argument).filename().string()
                                  : argument.starts_with('/') ? short_path(argument)
                                                              : argument;
        text += (text.empty() ? "" : " ") + printable(shown);
    }
    return text.empty() ? "?" : text;
}

std::string process_name(const ProcessModel& model) {
    const std::string role = role_text(model.role);
    return role.empty() ? short_command(model) : role;
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

std::string pool_purpose(PoolOwner owner) {
    static constexpr NameTable kPurposes(
        {{PoolOwner::None, ""},
         {PoolOwner::Jax,
          "XLA's pool for JAX's arrays, which XLA hands out inside it, out of gpuleak's sight"},
         {PoolOwner::TensorFlow,
          "TensorFlow's pool for its tensors, which it hands out inside it, out of gpuleak's sight"},
         {PoolOwner::Unknown,
          "a BFC allocator's pool, whose arrays are handed out inside it, out of gpuleak's sight"}},
        PoolOwner::None);
    return kPurposes[owner];
}

std::string site_place(const LeakSite& site, StackFrames& stacks) {
    return site.before_attach ? "before gpuleak attach began recording (no stack)"
                              : stacks.describe(site.stack_id);
}

std::string site_purpose(const LeakSite& site, StackFrames& stacks) {
    if (site.pool != PoolOwner::None && !site.device_pool())
        return "a pool of pinned host memory for the framework's copies, which it hands out inside it";
    return site.pool != PoolOwner::None ? pool_purpose(site.pool)
                                        : library_purpose(stacks.frames(site.stack_id));
}

namespace {

// How to see each array of the framework as an allocation of its own, at the line that made it. XLA's
// platform allocator maps each buffer by itself, which slows training; TensorFlow's cuda_malloc_async is
// CUDA's stream-ordered pool, made for training.
std::string pool_advice(PoolOwner owner) {
    constexpr std::string_view jax =
        "XLA_PYTHON_CLIENT_PREALLOCATE=false XLA_PYTHON_CLIENT_ALLOCATOR=platform "
        "(slower: to find a leak, not to train)";
    constexpr std::string_view tensorflow = "TF_GPU_ALLOCATOR=cuda_malloc_async";
    switch (owner) {
    case PoolOwner::Jax:
        return fmt::format("run with {}", jax);
    case PoolOwner::TensorFlow:
        return fmt::format("run with {}", tensorflow);
    case PoolOwner::Unknown:
    case PoolOwner::None:
        break;
    }
    return fmt::format("run JAX with {}, or TensorFlow with {}", jax, tensorflow);
}

const char* pool_owner_text(PoolOwner owner) {
    return owner == PoolOwner::Jax          ? "XLA (JAX)"
           : owner == PoolOwner::TensorFlow ? "TensorFlow"
                                            : "A BFC allocator";
}

// Which of TensorFlow's allocators made a pool, and what it does: by default it takes most of the device
// at its first use; with memory growth it grows as its tensors need and never shrinks.
std::string tensorflow_pool_mode(const PoolFacts& pool) {
    return pool.regions == 1 ? " (its default allocator, which takes most of the device at its first use)"
                             : " (memory growth, as tf.config.experimental.set_memory_growth or "
                               "TF_FORCE_GPU_ALLOW_GROWTH=true asks: the pool grows as its tensors need and "
                               "never shrinks)";
}

std::string pool_text(const PoolFacts& pool) {
    const char* owner = pool_owner_text(pool.owner);
    const std::string mode = pool.owner == PoolOwner::TensorFlow ? tensorflow_pool_mode(pool) : std::string();
    const std::string share =
        pool.capacity && *pool.capacity > 0
            ? fmt::format(", {:.0f}% of device {}'s {},",
                          100.0 * static_cast<double>(pool.bytes) / static_cast<double>(*pool.capacity),
                          pool.device, human_bytes(*pool.capacity))
            : fmt::format(" on device {},", pool.device);
    const std::string reserved =
        pool.regions == 1
            ? fmt::format("{} reserved {}{} as its own pool at {:.1f} s{}", owner, human_bytes(pool.bytes),
                          share, seconds_of(pool.first_ns), mode)
            : fmt::format("{} grew its own pool to {}{} in {} regions, from {:.1f} s to {:.1f} s{}", owner,
                          human_bytes(pool.bytes), share, pool.regions, seconds_of(pool.first_ns),
                          seconds_of(pool.last_ns), mode);
    const char* growth = "A pool is not a leak.";
    if (pool.grew_through_work)
        growth =
            "A pool is not a leak, but this one grew through the program's work, as a leak does: what it "
            "holds inside kept growing.";
    else if (pool.regions > 1)
        growth = "A pool is not a leak; its growth through the program's work would be a sign of one.";
    return fmt::format(
        "{}, and hands out its arrays inside it itself: the figures above count the whole pool, and which "
        "line holds memory inside it cannot be seen from the CUDA calls gpuleak records. {} To see each "
        "array as an allocation of its own, at the line that made it, {}.",
        reserved, growth, pool_advice(pool.owner));
}

// What the figures count where TensorFlow made each tensor by itself.
std::string per_tensor_text() {
    return "TensorFlow allocated each tensor by itself through CUDA's stream-ordered allocator "
           "(TF_GPU_ALLOCATOR=cuda_malloc_async): the figures count its tensors, each at the line that "
           "made it, or, made on TensorFlow's own threads, at the program's line that waited for them.";
}

// TensorFlow's allocator, and that within a process it never gives back what it took: where the program
// leaked or ran out, the cure is a process per trial.
std::string allocator_text(const Diagnosis& diagnosis) {
    if (!diagnosis.allocator || diagnosis.allocator->framework != PoolOwner::TensorFlow)
        return {};
    std::string text = diagnosis.allocator->mode == AllocatorMode::PerTensor ? " " + per_tensor_text() : "";
    if (diagnosis.allocator->xla)
        text += " Its compiled steps (XLA's, as Keras compiles them by default) take their memory from the "
                "same allocator.";
    if (diagnosis.kind == DiagnosisKind::Leak || diagnosis.kind == DiagnosisKind::PoolExhausted ||
        diagnosis.largest_failure || (diagnosis.pool && diagnosis.pool->grew_through_work))
        text +=
            " TensorFlow gives back the device memory it took only when its process ends: in a search, run "
            "each trial in a process of its own (gpuleak.isolated runs a function so).";
    return text;
}

// The program ran out of memory inside a framework's pool.
std::string pool_exhausted_text(const ProcessModel& model, const PoolFacts& pool) {
    return fmt::format("The program ran out of device memory inside {}'s pool: {}. What filled the pool was "
                       "handed out inside it, and nothing outside it grew.",
                       pool.owner == PoolOwner::Unknown ? "a BFC allocator" : pool_owner_text(pool.owner),
                       program_error_text(model, *model.error));
}

// The verdict alone.
std::string verdict_text(const ProcessModel& model, const Diagnosis& diagnosis, StackFrames& stacks) {
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
            human_bytes(cache.peak_allocated), human_bytes(cache.final_allocated),
            human_bytes(cache.peak_reserved), cache.device,
            human_bytes(cache.final_reserved - cache.final_allocated), failures);
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
            human_bytes(outside.used_by_driver), outside.device, human_bytes(outside.obtained),
            human_bytes(outside.used_by_driver - outside.obtained), failures);
    }
    case DiagnosisKind::HostRamGrowth:
        return (model.header.host_only() ? std::string() : std::string("GPU memory is steady. ")) +
               host_growth_text(model, *diagnosis.host_ram) + failures;
    case DiagnosisKind::PoolExhausted:
        return pool_exhausted_text(model, *diagnosis.pool) + failures;
    case DiagnosisKind::Incomplete:
        return incomplete_text(model.exactness) + failures;
    case DiagnosisKind::Stable:
        break;
    }
    if (model.header.host_only()) {
        const std::string uss = model.host.peak_uss ? fmt::format(", its unique memory (USS) at {}",
                                                                  human_bytes(*model.host.peak_uss))
                                                    : "";
        return fmt::format("No sign of growth in host memory: its resident memory (RSS) peaked at {}{}.{}",
                           human_bytes(model.host.peak_rss), uss, failures);
    }
    const std::string cached = diagnosis.cached_at_end > 0
                                   ? fmt::format(" ({} of it held in the allocator's cache for reuse)",
                                                 human_bytes(diagnosis.cached_at_end))
                                   : std::string();
    // Attached to a program whose memory was all made before (its caching allocator reusing what it
    // holds, with no adapter to report its blocks): there was nothing to judge.
    if (model.header.attached() && model.events == 0)
        return fmt::format("Nothing to judge: the program made and freed no device memory that gpuleak could "
                           "see in the {:.1f} s gpuleak attach recorded it (a PyTorch program shows its "
                           "tensors through the adapter, which gpuleak attach builds for its torch).{}",
                           seconds_of(model.duration_ns), failures);
    return fmt::format(
        "No sign of a leak{}: allocated memory peaked at {} and ended at {}; reserved ended at {}{}.{}",
        diagnosis.pool ? " outside the framework's pool" : "", human_bytes(diagnosis.peak_allocated),
        human_bytes(diagnosis.final_allocated), human_bytes(diagnosis.final_reserved), cached, failures);
}

} // namespace

std::string diagnosis_text(const ProcessModel& model, const Diagnosis& diagnosis, StackFrames& stacks) {
    const std::string verdict = verdict_text(model, diagnosis, stacks);
    return (diagnosis.pool ? verdict + " " + pool_text(*diagnosis.pool) : verdict) +
           allocator_text(diagnosis);
}

std::string role_text(const ProcessRole& role) {
    const char* method = start_method_name(role.start_method);
    switch (role.kind) {
    case RoleKind::DataLoaderWorker: {
        std::string text =
            role.worker_id ? fmt::format("DataLoader worker {}", *role.worker_id) : "DataLoader worker";
        // Fork is a DataLoader's default on Linux: only the others are said.
        if (role.start_method != StartMethod::Fork && method != nullptr)
            text += fmt::format(" ({})", method);
        return text;
    }
    case RoleKind::ForkedWorker:
        return fmt::format("multiprocessing worker ({})", method != nullptr ? method : "fork");
    case RoleKind::ForkedChild:
        return "forked child";
    case RoleKind::SpawnedChild:
        return "multiprocessing child (spawn)";
    case RoleKind::ResourceTracker:
        return "multiprocessing's resource tracker";
    case RoleKind::ForkServer:
        return "multiprocessing's fork server";
    case RoleKind::Rank:
        return role.world_size > 0 ? fmt::format("rank {} of {}", role.rank, role.world_size)
                                   : fmt::format("rank {}", role.rank);
    case RoleKind::Program:
        break;
    }
    return {};
}

std::string host_point_text(const HostPoint& point) {
    std::string text = fmt::format("RSS {}", human_bytes(point.rss));
    if (point.has(format::HostField::Proportional))
        text += fmt::format(", USS {}, PSS {}", human_bytes(point.sample.uss), human_bytes(point.sample.pss));
    if (point.has(format::HostField::Status) && point.sample.rss_shmem > 0)
        text += fmt::format(", shared memory {}", human_bytes(point.sample.rss_shmem));
    if (point.has(format::HostField::Status) && point.sample.swap > 0)
        text += fmt::format(", swap {}", human_bytes(point.sample.swap));
    return text;
}

namespace {

// `text` with each run of white space (a message's line breaks) one space, cut before the character past
// `most` bytes.
std::string one_line(const std::string& text, size_t most) {
    std::string line;
    for (const char c : text) {
        const bool space = c == ' ' || c == '\n' || c == '\t' || c == '\r';
        if (space && (line.empty() || line.back() == ' '))
            continue;
        line.push_back(space ? ' ' : c);
    }
    while (!line.empty() && line.back() == ' ')
        line.pop_back();
    if (line.size() <= most)
        return line;
    return line.substr(0, utf8_prefix_bytes(line, most)) + "...";
}

} // namespace

std::string program_error_text(const ProcessModel& model, const ProgramError& error) {
    constexpr size_t kMostMessageBytes = 300;
    std::string text = printable(error.type);
    // TensorFlow begins an op's error with the graph node it ran in ("{{function_node
    // __wrapped__Mul_device_/job:localhost/...}} failed to allocate memory"): its own bookkeeping.
    std::string_view message = error.message;
    if (message.starts_with("{{function_node ")) {
        const size_t end = message.find("}}");
        message = end == std::string_view::npos ? message : message.substr(end + 2);
    }
    const std::string line = one_line(std::string(message), kMostMessageBytes);
    if (!line.empty())
        text += ": " + printable(line);
    if (error.program_frame) {
        const ProgramError::Frame& frame = error.frames[*error.program_frame];
        text += frame.source_name.empty()
                    ? fmt::format(", at {}:{} in {}", printable(short_path(frame.file)), frame.line,
                                  printable(frame.function))
                    : fmt::format(", at {}, line {}", printable(frame.source_name), frame.line);
    }
    if (error.failure) {
        const FailureSummary& failure = model.failures[*error.failure];
        text += fmt::format(" (memory ran out: the allocation of {} at {:.2f} s failed)",
                            human_bytes(static_cast<double>(failure.bytes)), seconds_of(failure.time_ns));
    }
    return text;
}

std::string cell_errors_text(const ProcessModel& model) {
    if (model.cell_errors.empty())
        return {};
    const ProgramError& latest = model.cell_errors.back();
    const size_t before = model.cell_errors.size() - 1;
    return fmt::format("{} raised {}{}", printable(latest.cell), program_error_text(model, latest),
                       before == 0
                           ? std::string()
                           : fmt::format(" ({} earlier cell{} raised too)", before, before == 1 ? "" : "s"));
}

namespace {

bool fault_signal(int signal_number) {
    return signal_number == SIGSEGV || signal_number == SIGBUS || signal_number == SIGFPE ||
           signal_number == SIGILL;
}

std::string signal_name(int signal_number) {
    const char* name = sigabbrev_np(signal_number);
    return fmt::format("SIG{}", name != nullptr ? name : "?");
}

// What the kernel's own signals mean, where the signal alone does not say it.
std::string kernel_sent(int signal_number) {
    switch (signal_number) {
    case SIGINT:
        return "Ctrl-C at its terminal";
    case SIGQUIT:
        return "Ctrl-\\ at its terminal";
    case SIGHUP:
        return "its terminal hung up";
    case SIGPIPE:
        return "it wrote to a pipe or a socket whose reader had gone";
    case SIGXCPU:
        return "its CPU time limit (ulimit -t) ran out";
    case SIGXFSZ:
        return "it wrote past its file size limit (ulimit -f)";
    default:
        return "";
    }
}

} // namespace

std::string sender_text(const ProcessModel& model) {
    const ProcessEnd& end = model.header.end;
    if (end.state != format::EndState::Signaled)
        return "";
    const SignalSender& sender = end.sender;
    const std::string name = sender.name.empty() ? std::string() : " (" + printable(sender.name) + ")";
    switch (sender.kind) {
    case format::SenderKind::Kernel:
        return kernel_sent(end.signal);
    case format::SenderKind::Itself:
        // A fault's handler (Python's faulthandler) raises it again once it has said where it happened.
        if (fault_signal(end.signal))
            return "";
        return end.signal == SIGABRT ? "it aborted itself (abort(): a failed assertion, an uncaught C++ "
                                       "exception, or a library's fatal error)"
                                     : "it sent the signal to itself";
    case format::SenderKind::Process:
        return fmt::format("sent by pid {}{}{}", sender.pid, name,
                           sender.pid == model.header.ppid ? ", its parent" : "");
    case format::SenderKind::OomKiller:
        return "the kernel's OOM killer sent it, as memory ran out";
    case format::SenderKind::Notebook:
        return fmt::format("Jupyter (pid {}{}) sent it to end the kernel: a restart or a shutdown that the "
                           "kernel, busy, did not answer in time",
                           sender.pid, sender.name.empty() ? std::string() : ", " + printable(sender.name));
    case format::SenderKind::Unknown:
        break;
    }
    return sender.written_by_launcher ? "who sent it is not known; the OOM killer was not confirmed" : "";
}

const char* ended_how(const ProcessModel& model) {
    const ProcessEnd& end = model.header.end;
    switch (end.state) {
    case format::EndState::Exited:
        return "exit";
    case format::EndState::Signaled:
        return "signal";
    case format::EndState::Exec:
        return "exec";
    case format::EndState::Detached:
        return "detached";
    case format::EndState::Running:
        break;
    }
    return end.running_when_opened == true ? "running" : "killed";
}

std::string ended_text(const ProcessModel& model) {
    const double seconds = seconds_of(model.duration_ns);
    const ProcessEnd& end = model.header.end;
    switch (end.state) {
    case format::EndState::Exited:
        return fmt::format("exited with status {} after {:.1f} s", end.exit_code, seconds);
    case format::EndState::Signaled: {
        const std::string sender = sender_text(model);
        return fmt::format("killed by signal {} ({}) after {:.1f} s{}", end.signal, signal_name(end.signal),
                           seconds, sender.empty() ? std::string() : ": " + sender);
    }
    case format::EndState::Exec:
        return fmt::format(
            "replaced its image with exec after {:.1f} s (the new image has a trace of its own)", seconds);
    case format::EndState::Detached:
        return fmt::format("went on running: gpuleak attach stopped recording it after {:.1f} s", seconds);
    case format::EndState::Running:
        break;
    }
    if (end.running_when_opened == true)
        return fmt::format("still running when this report was made, {:.1f} s after it started", seconds);
    return fmt::format("killed: no exit record (SIGKILL, e.g. by the OOM killer{}) after {:.1f} s",
                       end.running_when_opened ? "" : ", or still running", seconds);
}

EndedText ended_texts(const std::vector<ProcessReport>& reports) {
    return [&reports](const RankRow& row) { return ended_text(reports[row.process].model); };
}

std::string killed_text(const ProcessModel& model, const KilledFacts& killed) {
    // The launcher saw its child die by SIGKILL and wrote its end; anywhere else a process that left no end
    // record was killed by a signal no handler sees.
    const std::string how =
        model.header.end.state == format::EndState::Signaled
            ? fmt::format(
                  "It was killed by SIGKILL (no exception, no traceback): {}.",
                  model.header.end.sender.kind == format::SenderKind::OomKiller
                      ? "the kernel's OOM killer sent it, as memory ran out"
                      : "who sent it is not known, most often the kernel's OOM killer as memory runs out")
            : fmt::format(
                  "It left no end record: it was killed by a signal gpuleak cannot see, most often SIGKILL, "
                  "which the kernel's OOM killer sends when memory runs out (or by one whose handler the "
                  "program set itself, such as a DataLoader worker's SIGBUS when /dev/shm is full){}.",
                  // Another machine's process may still run for all this report can tell.
                  model.header.end.running_when_opened
                      ? ""
                      : ", or it was still running when this report was made");
    std::string text = fmt::format("{} Its last sample, at {:.1f} s: {}.", how,
                                   seconds_of(killed.last.time_ns), host_point_text(killed.last));
    if (killed.last.has(format::HostField::CgroupLimit))
        text += fmt::format(" Its memory cgroup held {} of its limit of {} then.",
                            human_bytes(killed.last.sample.cgroup_bytes),
                            human_bytes(killed.last.sample.cgroup_limit_bytes));
    else if (killed.last.has(format::HostField::Available) && model.header.host_memory_bytes != 0)
        text += fmt::format(" The machine had {} of its {} available then.",
                            human_bytes(killed.last.sample.available_bytes),
                            human_bytes(model.header.host_memory_bytes));
    if (killed.largest_pid != model.header.pid) {
        const std::string role = role_text(killed.largest_role);
        text +=
            fmt::format(" The process of the run with the most resident memory then was pid {}{}, with {}.",
                        killed.largest_pid, role.empty() ? std::string() : " (" + role + ")",
                        human_bytes(killed.largest_rss));
    } else {
        text += " No other process of the run held more resident memory then.";
    }
    return text;
}

namespace {

std::string memory_held(bool cgroup, uint64_t used, uint64_t limit) {
    const double share = 100.0 * static_cast<double>(used) / static_cast<double>(limit);
    return cgroup ? fmt::format("the run's memory cgroup held {} of its limit of {} ({:.0f} %)",
                                human_bytes(used), human_bytes(limit), share)
                  : fmt::format("the machine had {} of its {} in use ({:.0f} %)", human_bytes(used),
                                human_bytes(limit), share);
}

} // namespace

std::string run_memory_held(const RunMemoryFacts& peak) {
    return memory_held(peak.cgroup, peak.used, peak.limit) +
           (peak.cgroup ? "" : ", all of its processes counted, not only the run's");
}

std::string pressure_text(const MemoryPressureFacts& pressure) {
    const std::string held = memory_held(pressure.cgroup, pressure.used, pressure.limit);
    return fmt::format(
        "At {:.1f} s {}, and this process held the most resident memory of the run ({}). When memory runs "
        "out, the kernel's OOM killer kills the process whose memory weighs the most, most likely this one "
        "(SIGKILL: no exception, no traceback; a DataLoader reports `worker ... is killed by signal: "
        "Killed`). Make the processes that grow hold less (see their host memory), run fewer workers, or "
        "give the run more memory.",
        seconds_of(pressure.time_ns), held, human_bytes(pressure.rss));
}

std::string host_growth_brief(const HostRamFacts& host) {
    const auto grew = [](uint64_t before, uint64_t after) {
        return after >= before ? "grew by " + human_bytes(after - before)
                               : "fell by " + human_bytes(before - after);
    };
    switch (host.cause) {
    case HostGrowthCause::CopyOnWrite:
        return fmt::format("its unique memory (USS) {} while its resident memory (RSS) {}: copy-on-write of "
                           "its parent's memory",
                           grew(host.from.sample.uss, host.to.sample.uss), grew(host.from.rss, host.to.rss));
    case HostGrowthCause::SharedMemory:
        return fmt::format("its resident shared memory {}: shared-memory tensors not released",
                           grew(host.from.sample.rss_shmem, host.to.sample.rss_shmem));
    case HostGrowthCause::Allocations:
        break;
    }
    if (!host.from.has(format::HostField::Status))
        return fmt::format("its resident memory (RSS) {} through its work: it allocates and keeps it",
                           grew(host.from.rss, host.to.rss));
    return fmt::format("the memory it allocated {} through its work: it allocates and keeps it",
                       grew(host.from.allocated(), host.to.allocated()));
}

namespace {

std::string host_growth_paragraph(const ProcessModel& model, const HostRamFacts& host) {
    const char* finalized = host.before_finalizing ? " before Python finalized" : "";
    const std::string span =
        fmt::format("from {:.1f} s to {:.1f} s", seconds_of(host.from.time_ns), seconds_of(host.to.time_ns));
    switch (host.cause) {
    case HostGrowthCause::CopyOnWrite:
        return fmt::format(
            "Its unique memory (USS) grew from {} to {} {}{} while its resident memory (RSS) went from {} to "
            "{}: "
            "pages it shared with the process it was forked from became its own copies as it wrote to them. "
            "That is copy-on-write, typically reference counts written on a dataset held as Python objects "
            "(a list of tuples, dicts or strings) that the worker reads (pytorch/pytorch#13246); each worker "
            "ends up with a copy of what it read. Hold the data in numpy arrays or tensors, not in lists of "
            "Python objects.",
            human_bytes(host.from.sample.uss), human_bytes(host.to.sample.uss), span, finalized,
            human_bytes(host.from.rss), human_bytes(host.to.rss));
    case HostGrowthCause::SharedMemory:
        return fmt::format(
            "Its resident shared memory grew from {} to {} {}{}: shared-memory tensors (in /dev/shm: the "
            "batches DataLoader workers pass to the main process, tensors moved with share_memory_()) that "
            "are not released. Keep no references to received batches beyond the step that uses them.",
            human_bytes(host.from.sample.rss_shmem), human_bytes(host.to.sample.rss_shmem), span, finalized);
    case HostGrowthCause::Allocations:
        break;
    }
    const char* where =
        model.role.kind == RoleKind::DataLoaderWorker
            ? "a leak in the dataset's or the transforms' code, which the worker runs"
            : "a leak in host memory: tensors kept on the CPU, lists or caches that grow every "
              "step";
    if (!host.from.has(format::HostField::Status))
        return fmt::format(
            "Host memory (RSS) grew from {} to {} through its work, {}{}: the process allocates "
            "and keeps it, {}.",
            human_bytes(host.from.rss), human_bytes(host.to.rss), span, finalized, where);
    const char* measure =
        host.to.has(format::HostField::HeapFree)
            ? "anonymous memory, resident and swapped, less what malloc keeps free for reuse"
            : "anonymous memory, resident and swapped";
    return fmt::format("The memory it allocated ({}) grew from {} to {} through its work, {}{} (its RSS from "
                       "{} to {}): the process allocates and keeps it, {}.",
                       measure, human_bytes(host.from.allocated()), human_bytes(host.to.allocated()), span,
                       finalized, human_bytes(host.from.rss), human_bytes(host.to.rss), where);
}

} // namespace

std::string host_growth_text(const ProcessModel& model, const HostRamFacts& host) {
    return host_growth_paragraph(model, host) +
           (host.while_importing > 0
                ? fmt::format(" Of that, {} came while it imported modules and is not counted as growth.",
                              human_bytes(host.while_importing))
                : "");
}

} // namespace gpuleak::analyzer
