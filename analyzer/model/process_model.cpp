#include "model/process_model.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <iterator>
#include <limits>
#include <map>
#include <tuple>
#include <unordered_map>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "common/name_table.h"
#include "model/live_objects.h"
#include "model/repetition.h"
#include "model/retainers.h"
#include "model/site_keys.h"
#include "model/thread_starts.h"
#include "model/timeline_thinning.h"
#include "python/named_sources.h"
#include "python/program_files.h"
#include "read/trace_set.h"

namespace gpuleak::analyzer {

using format::EventType;
using format::MemoryKind;

bool counts_as_reserved(MemoryKind kind) {
    return format::occupies_device_memory(kind);
}

namespace {

constexpr size_t kMaxFailureSnapshots = 64;
constexpr size_t kTopSitesAtFailure = 5;
// Comings back to one level of allocated device memory that make the program's work a loop of steps: the
// first step's end and two more.
constexpr uint64_t kMinStepReturns = 3;

// Reserved and allocated bytes per device, as they change when objects come and go.
class Totals {
  public:
    explicit Totals(bool blocks_are_allocated) {
        for (size_t kind = 0; kind < format::kKindCount; ++kind) {
            const auto memory_kind = static_cast<MemoryKind>(kind);
            const bool reserved = counts_as_reserved(memory_kind);
            counts_[kind] = {reserved, blocks_are_allocated ? memory_kind == MemoryKind::Block : reserved};
        }
    }

    void change(const LiveObject& object, bool add) {
        const auto kind = static_cast<size_t>(object.kind);
        if (kind >= format::kKindCount)
            return;
        const Counts counts = counts_[kind];
        if (!counts.reserved && !counts.allocated)
            return;
        Cells& cells = cells_of(object.device);
        Cell& cell = cells.now;
        const uint64_t reserved = counts.reserved ? object.size : 0;
        const uint64_t allocated = counts.allocated ? object.size : 0;
        // The totals move with the cells, modulo 2^64 like a sum over the cells would: they stay exactly
        // what summing them would give. Only an addition can make a peak.
        if (add) {
            cell.reserved += reserved;
            cell.allocated += allocated;
            total_.reserved += reserved;
            total_.allocated += allocated;
            cells.peak.reserved = std::max(cells.peak.reserved, cell.reserved);
            cells.peak.allocated = std::max(cells.peak.allocated, cell.allocated);
        } else {
            const uint64_t reserved_gone = std::min(cell.reserved, reserved);
            const uint64_t allocated_gone = std::min(cell.allocated, allocated);
            cell.reserved -= reserved_gone;
            cell.allocated -= allocated_gone;
            total_.reserved -= reserved_gone;
            total_.allocated -= allocated_gone;
        }
    }

    // Over all devices. Kept up to date by change(): the replay asks after every event.
    [[nodiscard]] uint64_t reserved() const { return total_.reserved; }
    [[nodiscard]] uint64_t allocated() const { return total_.allocated; }
    [[nodiscard]] uint64_t reserved_on(int device) const { return find(device).now.reserved; }
    [[nodiscard]] uint64_t allocated_on(int device) const { return find(device).now.allocated; }
    [[nodiscard]] uint64_t peak_reserved(int device) const { return find(device).peak.reserved; }
    [[nodiscard]] uint64_t peak_allocated(int device) const { return find(device).peak.allocated; }

  private:
    struct Cell {
        uint64_t reserved = 0;
        uint64_t allocated = 0;
    };
    struct Cells {
        Cell now;
        Cell peak;
    };
    // The ordinals the recorder accounts for, host and unknown: an array, as change() runs at every event.
    static constexpr int kFirstFlat = -2;
    static constexpr int kFlat = static_cast<int>(format::kMaxDevices) - kFirstFlat;

    Cells& cells_of(int device) {
        const int index = device - kFirstFlat;
        if (index >= 0 && index < kFlat) [[likely]]
            return flat_[static_cast<size_t>(index)];
        return other(device);
    }
    // Out of line: the map's insertion would keep change(), which runs at every event, from being inlined.
    [[gnu::noinline]] Cells& other(int device) { return others_[device]; }
    [[nodiscard]] Cells find(int device) const {
        const int index = device - kFirstFlat;
        if (index >= 0 && index < kFlat)
            return flat_[static_cast<size_t>(index)];
        auto it = others_.find(device);
        return it == others_.end() ? Cells{} : it->second;
    }

    struct Counts {
        bool reserved;
        bool allocated;
    };
    // By kind, looked up at every event.
    std::array<Counts, format::kKindCount> counts_{};
    std::array<Cells, kFlat> flat_{};
    std::map<int, Cells> others_;
    Cell total_;
};

bool process_reports_blocks(const TraceReader& trace) {
    const auto block = static_cast<size_t>(MemoryKind::Block);
    for (uint32_t slot = 0; slot < format::kAccountingSlots; ++slot)
        if (trace.header().accounting.peak_bytes[slot][block] != 0)
            return true;
    return false;
}

// Whether the program gave blocks back to its sub-allocator (what a cache holds for reuse), by the events
// before `program_events`; taken as so where the ring no longer holds its oldest events.
bool program_freed_blocks(const TraceReader& trace, uint64_t program_events) {
    bool freed = trace.events_dropped() > 0;
    if (!freed)
        trace.visit_events_newest_first([&](const Event& event) {
            freed = event.type == EventType::Free && event.kind == MemoryKind::Block &&
                    event.sequence < program_events;
            return !freed;
        });
    return freed;
}

uint64_t end_time(const TraceReader& trace) {
    const TraceHeader& header = trace.header();
    if (header.end.state != format::EndState::Running && header.end.monotonic_ns != 0)
        return header.end.monotonic_ns;
    uint64_t latest = header.start_monotonic_ns;
    if (const std::optional<Event> newest = trace.newest_event())
        latest = std::max(latest, newest->time_ns);
    if (!trace.timeline().empty())
        latest = std::max(latest, trace.timeline().back().time_ns);
    for (const Event& event : trace.notable_events().events)
        latest = std::max(latest, event.time_ns);
    return latest;
}

// A site is shown with the stack of its own that holds the most bytes (the lowest id of those that tie,
// for an order that does not depend on hash tables).
uint32_t largest_stack(const std::map<uint32_t, uint64_t>& bytes_by_stack) {
    auto largest = bytes_by_stack.begin();
    for (auto it = bytes_by_stack.begin(); it != bytes_by_stack.end(); ++it)
        if (it->second > largest->second)
            largest = it;
    return largest->first;
}

// Kinds a site holds memory of. Address space is not memory, and a mapping only shows physical memory
// counted already; None is the kind of allocations spilled without a site.
bool is_memory_held(MemoryKind kind) {
    return kind != MemoryKind::None && kind != MemoryKind::VaReservation && kind != MemoryKind::VmmMapping;
}

// Device memory a sub-allocator reserves for its blocks (LeakSite::segments).
bool is_segment_kind(MemoryKind kind) {
    return kind == MemoryKind::Device || kind == MemoryKind::VmmPhysical || kind == MemoryKind::AsyncPool;
}

// The allocations live at one moment of the replay that had no live slot, by site: a count and the
// bytes of objects of one kind, device and stack (SpilledSite), which the replay takes the Alloc events
// it holds no object for from.
class SpilledTallies {
  public:
    struct Tally {
        LiveObject object; // size: the bytes of them all
        uint64_t count = 0;
    };

    explicit SpilledTallies(const std::vector<SpilledSite>& spilled) {
        for (const SpilledSite& site : spilled)
            if (site.kind != MemoryKind::None) {
                Tally& tally = tallies_[{site.stack_id, site.device, site.kind}];
                tally.object = {tally.object.size + site.bytes, site.kind, site.device, site.stack_id};
                tally.count += site.count;
            }
    }
    // Takes one allocation of `object` out of its site's tally: false when the tally has none.
    bool take(const LiveObject& object) {
        if (tallies_.empty())
            return false;
        auto found = tallies_.find({object.stack_id, object.device, object.kind});
        if (found == tallies_.end() || found->second.count == 0)
            return false;
        Tally& tally = found->second;
        --tally.count;
        tally.object.size -= std::min(tally.object.size, object.size);
        return true;
    }
    template <class Visit> void for_each(Visit&& visit) const {
        for (const auto& [key, tally] : tallies_)
            if (tally.count > 0)
                visit(tally);
    }

  private:
    std::map<std::tuple<uint32_t, int, MemoryKind>, Tally> tallies_;
};

// The live sites of the kinds `holds` accepts, most bytes first: by site and kind, or by site alone
// (kind None).
template <class Holds>
std::vector<LiveSiteAt> live_sites(const LiveObjects& objects, const SpilledTallies& tallies,
                                   const SiteKeys& site_keys, Holds&& holds, bool by_kind) {
    struct Held {
        LiveSiteAt site;
        std::map<uint32_t, uint64_t> bytes_by_stack;
    };
    std::unordered_map<uint64_t, std::map<MemoryKind, Held>> by_site;
    const auto hold = [&](const LiveObject& object, uint64_t count) {
        if (!holds(object.kind))
            return;
        const MemoryKind kind = by_kind ? object.kind : MemoryKind::None;
        Held& held = by_site[site_keys.of(object.stack_id)][kind];
        held.site.kind = kind;
        held.site.bytes += object.size;
        held.site.count += count;
        held.bytes_by_stack[object.stack_id] += object.size;
    };
    objects.for_each([&](const LiveObject& object) { hold(object, 1); });
    tallies.for_each([&](const SpilledTallies::Tally& tally) { hold(tally.object, tally.count); });
    std::vector<LiveSiteAt> sites;
    for (auto& [key, of_kinds] : by_site) {
        for (auto& [kind, held] : of_kinds) {
            held.site.stack_id = largest_stack(held.bytes_by_stack);
            sites.push_back(held.site);
        }
    }
    // Equal bytes by stack id and kind: the order must not depend on the order of the hash tables.
    std::sort(sites.begin(), sites.end(), [](const auto& a, const auto& b) {
        return std::tie(b.bytes, a.stack_id, a.kind) < std::tie(a.bytes, b.stack_id, b.kind);
    });
    return sites;
}

// What the program held on the device: where a sub-allocator reports blocks, its segments hold the same
// bytes again.
std::vector<LiveSiteAt> top_sites(const LiveObjects& objects, const SpilledTallies& tallies,
                                  const SiteKeys& site_keys, bool reports_blocks) {
    std::vector<LiveSiteAt> sites = live_sites(
        objects, tallies, site_keys,
        [&](MemoryKind kind) {
            return (counts_as_reserved(kind) || kind == MemoryKind::Block) &&
                   !(reports_blocks && is_segment_kind(kind));
        },
        false);
    if (sites.size() > kTopSitesAtFailure)
        sites.resize(kTopSitesAtFailure);
    return sites;
}

int marker_interval(const std::vector<Marker>& markers, uint64_t time_ns) {
    auto after = std::upper_bound(markers.begin(), markers.end(), time_ns,
                                  [](uint64_t t, const Marker& marker) { return t < marker.time_ns; });
    return static_cast<int>(after - markers.begin()) - 1;
}

std::vector<Marker> collect_markers(const TraceReader& trace) {
    std::vector<Marker> markers;
    for (const Event& event : trace.notable_events().events) {
        if (event.type != EventType::Marker)
            continue;
        const std::string* label = trace.string(event.marker_label());
        markers.push_back(
            {since_start(event.time_ns, trace.header()), label != nullptr ? *label : std::string("?")});
    }
    std::stable_sort(markers.begin(), markers.end(),
                     [](const Marker& a, const Marker& b) { return a.time_ns < b.time_ns; });
    return markers;
}

std::map<uint32_t, uint32_t> collect_thread_start_stacks(const TraceReader& trace,
                                                         const std::vector<FailureSummary>& failures) {
    const ThreadStarts starts(trace);
    std::map<uint32_t, uint32_t> by_stack;
    if (starts.empty())
        return by_stack;
    const auto note = [&](uint32_t stack_id, uint32_t thread_id, uint64_t time_ns) {
        if (const uint32_t start = stack_id != 0 ? starts.of(thread_id, time_ns) : 0; start != 0)
            by_stack.emplace(stack_id, start);
    };
    for (const LiveAllocation& allocation : trace.live_allocations().allocations)
        note(allocation.stack_id, allocation.thread_id, since_start(allocation.time_ns, trace.header()));
    for (const FailureSummary& failure : failures)
        note(failure.stack_id, failure.thread_id, failure.time_ns);
    return by_stack;
}

struct ProgramEnd {
    uint64_t time_ns = 0;
    uint64_t sequence = 0;
};

std::optional<ProgramEnd> python_finalizing(const TraceReader& trace) {
    std::optional<ProgramEnd> earliest;
    for (const Event& event : trace.notable_events().events)
        if (event.type == EventType::PythonFinalizing) {
            const uint64_t time_ns = since_start(event.time_ns, trace.header());
            if (!earliest || time_ns < earliest->time_ns)
                earliest = ProgramEnd{time_ns, event.finalizing_ring_head()};
        }
    return earliest;
}

// A site is growing when its survivors were made through the program's work: at least this share of
// the program's events came between its oldest and its youngest survivor, and the survivors are spread
// over at least kMinGrowingParts of kProgramParts equal parts of those events. One-time allocations
// (weights, an optimizer's state, a workspace, a warm-up) are made within a few of its events, however
// long each took; what the last step still holds, next to one of them, spans the run but lies at its
// two ends.
constexpr double kGrowthShare = 0.25;
constexpr uint64_t kProgramParts = 10;
constexpr size_t kMinGrowingParts = 3;
// The site key of what was live when gpuleak attach began recording: no site key of a stack's is this.
constexpr uint64_t kBeforeAttachSite = ~uint64_t{0};
constexpr uint64_t kMinGrowingCount = 3;
constexpr long kMinGrowingIntervals = 3;
// Without markers, the survivors must also span this many repetitions of the program's work
// (repetition.h) among those the ring still holds: made over at least three of its steps.
constexpr uint64_t kMinRepetitions = 2;

struct ProgramSpread {
    double share = 0;   // of the program's events, between the oldest and the youngest
    size_t parts = 0;   // of the kProgramParts the program's events fall in, those with any
    uint64_t first = 0; // the oldest's event, where parts > 0
    uint64_t last = 0;  // the youngest's
};

// A stretch of events the survivors spilled at a site were made in (SpilledSite): where in it each was
// made is not known, so they are taken as spread over it.
struct SequenceRange {
    uint64_t first = 0;
    uint64_t last = 0;
};

// How the survivors the program's own code made (not those of its teardown) spread over its events.
ProgramSpread spread_in_program(const std::vector<uint64_t>& sequences,
                                const std::vector<SequenceRange>& ranges, uint64_t program_events) {
    ProgramSpread spread;
    if (program_events == 0)
        return spread;
    std::array<bool, kProgramParts> seen{};
    uint64_t first = UINT64_MAX;
    uint64_t last = 0;
    const auto part_of = [&](uint64_t sequence) { return sequence * kProgramParts / program_events; };
    for (uint64_t sequence : sequences) {
        if (sequence >= program_events)
            continue;
        seen[part_of(sequence)] = true;
        first = std::min(first, sequence);
        last = std::max(last, sequence);
    }
    for (const SequenceRange& range : ranges) {
        if (range.first >= program_events || range.first > range.last)
            continue;
        const uint64_t range_last = std::min(range.last, program_events - 1);
        for (uint64_t part = part_of(range.first); part <= part_of(range_last); ++part)
            seen[part] = true;
        first = std::min(first, range.first);
        last = std::max(last, range_last);
    }
    spread.parts = static_cast<size_t>(std::count(seen.begin(), seen.end(), true));
    if (spread.parts > 0) {
        spread.share = static_cast<double>(last - first) / static_cast<double>(program_events);
        spread.first = first;
        spread.last = last;
    }
    return spread;
}

// The allocations the program's code left live that were freed after it ended, at or after event
// `code_end`. Newest first, each free after the end waits for the allocation of its address and kind
// before it; a free before the end met first means that allocation is gone from the ring (or torn), and
// so is one made before the ring's oldest event: `unmatched` counts those frees.
std::vector<LiveAllocation> freed_after_code_end(const TraceReader& trace, uint64_t code_end,
                                                 uint64_t& unmatched) {
    std::vector<LiveAllocation> freed;
    std::map<std::pair<uint64_t, MemoryKind>, uint64_t> waiting_frees;
    unmatched = 0;
    trace.visit_events_newest_first([&](const Event& event) {
        if (event.sequence < code_end && waiting_frees.empty())
            return false;
        const std::pair<uint64_t, MemoryKind> key{event.address, event.kind};
        if (event.type == EventType::Free) {
            if (event.sequence >= code_end) {
                ++waiting_frees[key];
            } else if (const auto waiting = waiting_frees.find(key); waiting != waiting_frees.end()) {
                unmatched += waiting->second;
                waiting_frees.erase(waiting);
            }
        } else if (event.type == EventType::Alloc) {
            const auto waiting = waiting_frees.find(key);
            if (waiting == waiting_frees.end())
                return true;
            if (--waiting->second == 0)
                waiting_frees.erase(waiting);
            if (event.sequence < code_end)
                freed.push_back(LiveAllocation{event.address, event.size, event.time_ns, event.stream,
                                               event.stack_id, event.thread_id, event.device, event.kind,
                                               event.api, event.sequence});
        }
        return true;
    });
    for (const auto& [key, count] : waiting_frees)
        unmatched += count;
    return freed;
}

void find_leak_sites(const TraceReader& trace, const SiteKeys& site_keys, ProcessModel& model) {
    struct Accumulated {
        LeakSite site;
        std::map<uint32_t, uint64_t> bytes_by_stack;
        std::vector<uint64_t> times;
        std::vector<uint64_t> sequences;
        std::vector<SequenceRange> spilled_ranges;
        std::map<int, uint64_t> bytes_by_device;
    };
    // A site is also split by kind: where an allocator reports its blocks, the line that made a tensor
    // is also where the segment holding it was obtained, and the two answer different questions (what
    // the program holds, what the allocator keeps).
    std::map<std::pair<uint64_t, MemoryKind>, Accumulated> by_site;
    uint64_t unmatched = 0;
    const std::vector<LiveAllocation> freed_at_exit =
        model.code_end_ns ? freed_after_code_end(trace, model.program_events, unmatched)
                          : std::vector<LiveAllocation>();
    if (unmatched > 0)
        model.warnings.push_back(fmt::format(
            "{} allocation{} freed after the program's code ended {} made before the oldest event the ring "
            "still holds: {} not counted as live as the code ended",
            unmatched, unmatched == 1 ? "" : "s", unmatched == 1 ? "was" : "were",
            unmatched == 1 ? "it is" : "they are"));
    // Where each physical allocation is mapped, by its handle: the addresses the program's objects hold,
    // which the handle is not. A handle the driver hands out again after its release names a new
    // allocation only for the mappings made after it. Memory mapped at two ranges is placed at both.
    struct Mapping {
        LiveBlock block;
        uint64_t sequence;
    };
    std::multimap<uint64_t, Mapping> mapped_at;
    for (const std::vector<LiveAllocation>* allocations :
         {&trace.live_allocations().allocations, &freed_at_exit})
        for (const LiveAllocation& allocation : *allocations)
            if (allocation.kind == MemoryKind::VmmMapping)
                mapped_at.emplace(allocation.mapped_handle(),
                                  Mapping{{allocation.address, allocation.size}, allocation.sequence});
    const auto survivor = [&](const LiveAllocation& allocation, bool freed) {
        if (!is_memory_held(allocation.kind))
            return;
        const uint64_t key = allocation.api == format::kBeforeAttachApi ? kBeforeAttachSite
                                                                        : site_keys.of(allocation.stack_id);
        Accumulated& entry = by_site[{key, allocation.kind}];
        if (freed)
            entry.site.freed_at_exit += allocation.size;
        entry.bytes_by_stack[allocation.stack_id] += allocation.size;
        entry.bytes_by_device[allocation.device] += allocation.size;
        entry.site.bytes += allocation.size;
        ++entry.site.count;
        entry.times.push_back(since_start(allocation.time_ns, model.header));
        entry.sequences.push_back(allocation.sequence);
        const size_t placed = entry.site.blocks.size();
        if (allocation.kind == MemoryKind::VmmPhysical)
            for (auto [mapping, end] = mapped_at.equal_range(allocation.address); mapping != end; ++mapping)
                if (mapping->second.sequence > allocation.sequence)
                    entry.site.blocks.push_back(mapping->second.block);
        if (entry.site.blocks.size() == placed)
            entry.site.blocks.push_back({allocation.address, allocation.size});
    };
    for (const LiveAllocation& allocation : trace.live_allocations().allocations)
        survivor(allocation, false);
    for (const LiveAllocation& allocation : freed_at_exit)
        survivor(allocation, true);
    for (const SpilledSite& spilled : trace.live_allocations().spilled) {
        if (!is_memory_held(spilled.kind))
            continue;
        Accumulated& entry = by_site[{site_keys.of(spilled.stack_id), spilled.kind}];
        entry.bytes_by_stack[spilled.stack_id] += spilled.bytes;
        entry.bytes_by_device[spilled.device] += spilled.bytes;
        entry.site.bytes += spilled.bytes;
        entry.site.count += spilled.count;
        entry.site.spilled += spilled.count;
        // Their own times and places in the order of events are not known: the stretches they were
        // made in stand for them.
        for (const SpilledSite::Stretch& stretch : spilled.stretches) {
            entry.times.push_back(since_start(stretch.first_time_ns, model.header));
            entry.times.push_back(since_start(stretch.last_time_ns, model.header));
            entry.spilled_ranges.push_back({stretch.first_sequence, stretch.end_sequence - 1});
        }
    }
    std::vector<size_t> judged_by_repetition; // into leak_sites
    std::vector<std::vector<uint64_t>> survivors_of_judged;
    for (auto& [key, entry] : by_site) {
        LeakSite& site = entry.site;
        site.stack_id = largest_stack(entry.bytes_by_stack);
        site.kind = key.second;
        site.segments = model.reports_blocks && is_segment_kind(site.kind);
        site.before_attach = key.first == kBeforeAttachSite;
        site.device = std::max_element(entry.bytes_by_device.begin(), entry.bytes_by_device.end(),
                                       [](const auto& a, const auto& b) { return a.second < b.second; })
                          ->first;
        // Spilled allocations whose stretches were torn (a corrupt trace) have no time: read as the start.
        if (entry.times.empty())
            entry.times.push_back(0);
        auto [oldest, youngest] = std::minmax_element(entry.times.begin(), entry.times.end());
        site.first_ns = *oldest;
        site.last_ns = *youngest;
        const ProgramSpread spread =
            spread_in_program(entry.sequences, entry.spilled_ranges, model.program_events);
        site.program_share = spread.share;
        site.program_events = {spread.first, spread.last};
        const double span_s = seconds_of(site.last_ns - site.first_ns);
        const bool many = site.count >= kMinGrowingCount;
        bool spread_in_markers = false;
        if (!model.markers.empty()) {
            std::vector<int> intervals;
            for (uint64_t t : entry.times)
                intervals.push_back(marker_interval(model.markers, t));
            std::sort(intervals.begin(), intervals.end());
            const auto distinct = std::unique(intervals.begin(), intervals.end()) - intervals.begin();
            site.marker_range = std::make_pair(intervals.front(), intervals[distinct - 1]);
            spread_in_markers = distinct >= kMinGrowingIntervals;
            if (distinct > 1)
                site.bytes_per_marker_interval =
                    static_cast<double>(site.bytes) / static_cast<double>(distinct);
        }
        // Markers are the program's own steps; within them, or without any, its events are, and then
        // repetitions of its work must be seen among them (judged below, for all such sites at once).
        const bool spread_in_events = spread.share >= kGrowthShare && spread.parts >= kMinGrowingParts;
        site.spread_over_work = many && (spread_in_markers || spread_in_events);
        site.growing = site.spread_over_work;
        if (site.growing && !spread_in_markers) {
            judged_by_repetition.push_back(model.leak_sites.size());
            survivors_of_judged.push_back(std::move(entry.sequences));
        }
        if (span_s > 0)
            site.bytes_per_second = static_cast<double>(site.bytes) / span_s;
        std::sort(site.blocks.begin(), site.blocks.end(),
                  [](const LiveBlock& a, const LiveBlock& b) { return a.address < b.address; });
        model.leak_sites.push_back(std::move(site));
    }
    const std::vector<Repetitions> repetitions =
        find_repetitions(trace, survivors_of_judged, model.program_events, kMinRepetitions);
    for (size_t i = 0; i < judged_by_repetition.size(); ++i)
        if (repetitions[i].known && repetitions[i].seen < kMinRepetitions)
            model.leak_sites[judged_by_repetition[i]].growing = false;
    std::sort(model.leak_sites.begin(), model.leak_sites.end(), [](const LeakSite& a, const LeakSite& b) {
        return a.bytes != b.bytes ? a.bytes > b.bytes : a.stack_id < b.stack_id;
    });
}

// nvidia-smi's form of a UUID: "GPU-" and the 16 bytes in hex, grouped 4-2-2-2-6; empty for all zero.
std::string uuid_text(const std::array<uint8_t, 16>& bytes) {
    if (std::all_of(bytes.begin(), bytes.end(), [](uint8_t byte) { return byte == 0; }))
        return {};
    std::string text = "GPU-";
    for (size_t i = 0; i < bytes.size(); ++i) {
        if (i == 4 || i == 6 || i == 8 || i == 10)
            text += '-';
        text += fmt::format("{:02x}", bytes[i]);
    }
    return text;
}

// The contexts the process made, one per device.
void find_contexts(const TraceReader& trace, ProcessModel& model) {
    for (const Event& event : trace.notable_events().events) {
        if (event.type != EventType::Context || event.device < 0 ||
            context_on(model, event.device) != nullptr)
            continue;
        model.contexts.push_back({event.device, since_start(event.time_ns, model.header), event.stack_id,
                                  uuid_text(event.device_uuid())});
    }
    std::sort(model.contexts.begin(), model.contexts.end(),
              [](const DeviceContext& a, const DeviceContext& b) { return a.device < b.device; });
}

// The exception the program's code ended with, if it recorded one (ProcessModel::error), and those its
// notebook's cells ended with (ProcessModel::cell_errors); a record that is not gpuleak's is left out with
// a warning.
void find_program_errors(const TraceReader& trace, ProcessModel& model) {
    std::optional<NamedSources> named;
    for (const Event& event : trace.notable_events().events) {
        if (event.type != EventType::ProgramError)
            continue;
        const uint64_t time_ns = since_start(event.time_ns, model.header);
        const std::string* document = trace.string(event.error_document());
        const nlohmann::json root =
            document != nullptr ? nlohmann::json::parse(*document, nullptr, false) : nlohmann::json();
        const auto text = [&](const char* name) -> const std::string* {
            const auto found = root.find(name);
            return found != root.end() && found->is_string() ? found->get_ptr<const std::string*>() : nullptr;
        };
        const auto frames = root.is_object() ? root.find("frames") : root.end();
        if (!root.is_object() || text("type") == nullptr || text("message") == nullptr ||
            frames == root.end() || !frames->is_array()) {
            model.warnings.push_back(
                fmt::format("the record of an exception the program raised, at {:.2f} s, cannot be read",
                            seconds_of(time_ns)));
            continue;
        }
        const std::string* cell = text("cell");
        // The program ends once.
        if (cell == nullptr && model.error)
            continue;
        if (!named)
            named.emplace(trace);
        ProgramError error{
            *text("type"), *text("message"), cell != nullptr ? *cell : std::string(), {}, time_ns,
            std::nullopt,  std::nullopt};
        for (const nlohmann::json& frame : *frames) {
            if (!frame.is_array() || frame.size() != 3 || !frame[0].is_string() ||
                !frame[1].is_number_unsigned() || !frame[2].is_string())
                continue;
            ProgramError::Frame& added = error.frames.emplace_back();
            added.file = frame[0].get<std::string>();
            added.line = static_cast<uint32_t>(std::min<uint64_t>(frame[1].get<uint64_t>(), UINT32_MAX));
            added.function = frame[2].get<std::string>();
            if (const std::optional<NamedLine> source = named->find(added.file, added.line))
                added.source_name = source->name;
        }
        for (size_t i = error.frames.size(); i-- > 0;)
            if (is_program_file(error.frames[i].file)) {
                error.program_frame = i;
                break;
            }
        // The error the exception reports failed on the thread that raised it, which records the
        // exception (the program's main one as it ends; a kernel's, after the cell), and for a cell's,
        // while that cell ran: a kernel runs every cell on one thread.
        uint64_t since_ns = 0;
        if (cell != nullptr)
            for (const Marker& marker : model.markers)
                if (marker.label == *cell && marker.time_ns <= time_ns)
                    since_ns = marker.time_ns;
        if (says_out_of_memory(error))
            for (size_t i = model.failures.size(); i-- > 0;)
                if (model.failures[i].out_of_memory() && model.failures[i].time_ns <= time_ns &&
                    model.failures[i].time_ns >= since_ns && model.failures[i].thread_id == event.thread_id) {
                    error.failure = i;
                    break;
                }
        if (cell != nullptr)
            model.cell_errors.push_back(std::move(error));
        else
            model.error = std::move(error);
    }
}

// The failed allocations, oldest first. A sub-allocator's refusal that gave up after failed CUDA
// allocations on its thread and device (the record says how many) takes their place: one out-of-memory
// error, shown with the request as the program made it, and the CUDA error and free bytes of the last
// of them where it has none of its own.
std::vector<FailureSummary> collect_failures(const TraceReader& trace, const TraceHeader& header) {
    std::vector<FailureSummary> failures;
    for (const Event& event : trace.notable_events().events) {
        if (event.type != EventType::AllocFailed)
            continue;
        FailureSummary failure;
        failure.bytes = event.size;
        failure.error = event.result;
        failure.free_bytes = event.free_bytes_then();
        failure.device = event.device;
        failure.kind = event.kind;
        failure.time_ns = since_start(event.time_ns, header);
        failure.stack_id = event.stack_id;
        failure.thread_id = event.thread_id;
        if (event.refused_by_allocator()) {
            failure.allocator_refused = true;
            failure.failed_cuda_allocations = event.failures_given_up_after();
            // The thread's failures since its last refusal or failure on another device, as the
            // recorder counts them.
            uint64_t to_take = event.failures_given_up_after();
            for (size_t i = failures.size(); i-- > 0 && to_take > 0;) {
                const FailureSummary& earlier = failures[i];
                if (earlier.thread_id != event.thread_id)
                    continue;
                if (earlier.device != event.device || earlier.allocator_refused)
                    break;
                if (to_take == failure.failed_cuda_allocations) { // the last of them
                    failure.error = earlier.error;
                    if (!failure.free_bytes)
                        failure.free_bytes = earlier.free_bytes;
                }
                failures.erase(failures.begin() + static_cast<std::ptrdiff_t>(i));
                --to_take;
            }
        }
        failures.push_back(failure);
    }
    return failures;
}

using FailuresByTimeSize = std::map<std::pair<uint64_t, uint64_t>, FailureSummary*>;

// When the program's allocated device memory was highest, as a replay passes it: the first moment of
// the highest total, since the start.
struct AllocatedPeak {
    uint64_t bytes = 0;
    uint64_t time_ns = 0;
    std::optional<uint64_t> after_sequence; // none: the end, after every event
};

// How often the program's allocated device memory came back down to one level, and when it first did.
struct LevelReturns {
    uint64_t count = 0;
    uint64_t first_ns = 0;
};

// What replay_backwards finds as it goes back from the end, for its caller to keep.
struct Replay {
    Replay(bool reports_blocks, std::vector<Moment>& asked, FailuresByTimeSize& failures_by_time_size)
        : totals(reports_blocks), moments(asked), failures(failures_by_time_size) {}

    // The totals the replay leaves, whose peaks count.
    Totals totals;
    // Moments whose sites the replay takes (Moment::reached says which it reached).
    std::vector<Moment>& moments;
    // The failures whose moments it reaches, by the time and size of their events: it says what was live
    // then (FailureSummary::reserved_then, top_sites_then).
    FailuresByTimeSize& failures;
    // Where the allocated total was highest.
    AllocatedPeak peak;
    // By level, the frees of the program's code that brought the allocated total down to it.
    std::unordered_map<uint64_t, LevelReturns> returns;
};

// An event that changed no device's memory, as replay_backwards tells add_point.
constexpr int kNoDevice = std::numeric_limits<int>::min();

// Reconstructs the past from the exact live set at the end by undoing ring events newest first: the
// totals after every event in the ring (passed to add_point(time_ns, totals, device), newest first, while
// it returns true; `device` the ordinal whose memory the event changed, kNoDevice for none), and what
// `replay` asks and keeps. Returns the points passed, or nothing when add_point stopped the replay.
template <class AddPoint>
std::optional<size_t> replay_backwards(const TraceReader& trace, const ProcessModel& model,
                                       const SiteKeys& site_keys, Replay& replay, AddPoint&& add_point) {
    // Every replay starts from the live set at the end, whatever an earlier one left.
    replay.totals = Totals(model.reports_blocks);
    Totals& totals = replay.totals;
    LiveObjects objects(trace.live_allocations().allocations.size());
    for (const LiveAllocation& allocation : trace.live_allocations().allocations) {
        LiveObject object{allocation.size, allocation.kind, allocation.device, allocation.stack_id};
        objects.assign(format::key_space_of(allocation.kind), allocation.address, object);
        totals.change(object, true);
    }
    SpilledTallies tallies(trace.live_allocations().spilled);
    tallies.for_each([&](const SpilledTallies::Tally& tally) { totals.change(tally.object, true); });
    size_t snapshots = 0;
    size_t points = 0;
    bool stopped = false;
    // The moments asked about, the latest first: each is taken once the replay has undone every event
    // after it.
    std::vector<Moment*> moments;
    for (Moment& moment : replay.moments) {
        moment.reached = false;
        moment.sites.clear();
        if (moment.time_ns)
            moments.push_back(&moment);
    }
    std::sort(moments.begin(), moments.end(),
              [](const Moment* a, const Moment* b) { return *a->time_ns > *b->time_ns; });
    auto next_moment = moments.begin();
    // Before the replay undoes an event of `time_ns` and `sequence`: the moments at or after it.
    const auto take_moments_until = [&](uint64_t time_ns, uint64_t sequence) {
        const auto reached = [&](const Moment& moment) {
            return moment.after_sequence ? *moment.after_sequence >= sequence : *moment.time_ns >= time_ns;
        };
        for (; next_moment != moments.end() && reached(**next_moment); ++next_moment) {
            (*next_moment)->sites = live_sites(
                objects, tallies, site_keys, [&](MemoryKind kind) { return program_holds(model, kind); },
                true);
            (*next_moment)->reached = true;
        }
    };
    AllocatedPeak& peak = replay.peak;
    peak = {totals.allocated(), model.duration_ns, std::nullopt};
    replay.returns.clear();
    trace.visit_events_newest_first([&](const Event& event) {
        const uint64_t time_ns = since_start(event.time_ns, model.header);
        take_moments_until(time_ns, event.sequence);
        // Going back in time, an equal total is an earlier moment of the same peak: right after this event.
        if (totals.allocated() >= peak.bytes)
            peak = {totals.allocated(), time_ns, event.sequence};
        ++points;
        const bool changes_memory = event.type == EventType::Alloc || event.type == EventType::Free;
        if (!add_point(time_ns, totals, changes_memory ? event.device : kNoDevice)) {
            stopped = true;
            return false;
        }
        if (event.type == EventType::Alloc) {
            LiveObject removed;
            if (objects.take(format::key_space_of(event.kind), event.address, removed)) {
                totals.change(removed, false);
            } else {
                const LiveObject made{event.size, event.kind, event.device, event.stack_id};
                if (tallies.take(made))
                    totals.change(made, false);
            }
        } else if (event.type == EventType::Free) {
            const uint64_t level = totals.allocated();
            LiveObject object{event.size, event.kind, event.device, event.stack_id};
            objects.assign(format::key_space_of(event.kind), event.address, object);
            totals.change(object, true);
            if (totals.allocated() > level && event.sequence < model.program_events) {
                LevelReturns& returns = replay.returns[level];
                ++returns.count;
                returns.first_ns = time_ns;
            }
        } else if (event.type == EventType::AllocFailed && snapshots < kMaxFailureSnapshots) {
            auto failure = replay.failures.find({event.time_ns, event.size});
            if (failure != replay.failures.end()) {
                failure->second->reserved_then = totals.reserved_on(event.device);
                failure->second->top_sites_then =
                    top_sites(objects, tallies, site_keys, model.reports_blocks);
                ++snapshots;
            }
        }
        return true;
    });
    if (stopped)
        return std::nullopt;
    if (trace.events_dropped() == 0) {
        take_moments_until(0, 0);
        ++points;
        if (!add_point(0, totals, kNoDevice))
            return std::nullopt;
    }
    return points;
}

// The end of the first of the program's steps, where its device work repeats: each step frees what it
// made, bringing the allocated total back to where the step before left it, while set-up (a model's
// weights, an optimizer's state, a compile) makes what stays. The first time the total came back to the
// level it came back to most often (the earliest such level where several tie), if that was often enough.
// Not where the ring no longer holds the oldest events: its first step was before them.
std::optional<uint64_t> first_step_end(const TraceReader& trace, const Replay& replay) {
    if (trace.events_dropped() > 0)
        return std::nullopt;
    const LevelReturns* steps = nullptr;
    for (const auto& [level, returns] : replay.returns)
        if (steps == nullptr || returns.count > steps->count ||
            (returns.count == steps->count && returns.first_ns < steps->first_ns))
            steps = &returns;
    if (steps == nullptr || steps->count < kMinStepReturns)
        return std::nullopt;
    return steps->first_ns;
}

// Each device's timeline, as the replay passes the events that change it.
class DeviceTimelines {
  public:
    explicit DeviceTimelines(uint64_t end_ns) : end_ns_(end_ns) {}

    // What `device` holds after an event that changed it.
    void add(uint64_t time_ns, const Totals& totals, int device) {
        if (device < 0 || device >= static_cast<int>(format::kMaxDevices))
            return;
        thinner(static_cast<uint32_t>(device))
            .add({time_ns, totals.reserved_on(device), totals.allocated_on(device)});
    }
    DeviceThinner& thinner(uint32_t device) {
        std::optional<DeviceThinner>& thinner = thinners_[device];
        if (!thinner)
            thinner.emplace(end_ns_);
        return *thinner;
    }
    void clear() { thinners_ = {}; }

  private:
    uint64_t end_ns_;
    std::array<std::optional<DeviceThinner>, format::kMaxDevices> thinners_;
};

// The timeline from the replay and the samples, each device's from the replay into `devices`
// (null where one device held all the memory: its timeline is the process's; the caller adds the
// samples), and what `replay` keeps. Thinned as the replay goes when it can be (see StreamingThinner):
// that needs the number of points up front, which the ring's torn events make uncertain until it is
// replayed; the first replay assumes none, and a second knows. Otherwise all the points are kept and then
// sorted and thinned.
std::vector<TimelinePoint> build_timeline(const TraceReader& trace, const ProcessModel& model,
                                          const SiteKeys& site_keys,
                                          const std::vector<TimelinePoint>& samples, Replay& replay,
                                          DeviceTimelines* devices) {
    const size_t zero_point = trace.events_dropped() == 0 ? 1 : 0;
    size_t expected = trace.ring_slots_present() + zero_point + samples.size();
    for (int attempt = 0; attempt < 2; ++attempt) {
        StreamingThinner thinner(expected, samples);
        if (devices != nullptr)
            devices->clear();
        const std::optional<size_t> produced = replay_backwards(
            trace, model, site_keys, replay, [&](uint64_t time_ns, const Totals& now, int device) {
                if (devices != nullptr)
                    devices->add(time_ns, now, device);
                return thinner.add(time_ns, now.reserved(), now.allocated());
            });
        if (!produced)
            break;
        if (std::optional<std::vector<TimelinePoint>> timeline = thinner.finish())
            return std::move(*timeline);
        expected = *produced + samples.size();
    }
    std::vector<TimelinePoint> points;
    points.reserve(trace.ring_slots_present() + zero_point + samples.size());
    if (devices != nullptr)
        devices->clear();
    replay_backwards(trace, model, site_keys, replay, [&](uint64_t time_ns, const Totals& now, int device) {
        if (devices != nullptr)
            devices->add(time_ns, now, device);
        points.push_back(TimelinePoint{time_ns, now.reserved(), now.allocated(), {}, {}});
        return true;
    });
    const size_t ring_points = points.size();
    points.insert(points.end(), samples.begin(), samples.end());
    return sort_and_thin(std::move(points), ring_points);
}

// A model of the process's header, how long it ran, where its own code ended, and whether a
// sub-allocator reported its blocks.
ProcessModel start_model(const std::string& path, const TraceReader& trace) {
    ProcessModel model;
    model.path = path;
    model.header = trace.header();
    model.duration_ns = since_start(end_time(trace), model.header);
    model.program_events = model.header.counters.ring_head;
    if (const std::optional<ProgramEnd> end = python_finalizing(trace)) {
        model.code_end_ns = end->time_ns;
        model.program_events = std::min(model.program_events, end->sequence);
    }
    model.reports_blocks = process_reports_blocks(trace);
    model.freed_blocks = model.reports_blocks && program_freed_blocks(trace, model.program_events);
    model.events = model.header.counters.ring_head;
    model.events_overwritten = trace.events_dropped();
    return model;
}

// The moments of `labels`, each at the first marker of its label.
std::vector<Moment> moments_asked(const std::vector<std::string>& labels,
                                  const std::vector<Marker>& markers) {
    std::vector<Moment> moments;
    for (const std::string& label : labels) {
        Moment& moment = moments.emplace_back();
        moment.label = label;
        const auto marker =
            std::find_if(markers.begin(), markers.end(), [&](const Marker& m) { return m.label == label; });
        if (marker != markers.end())
            moment.time_ns = marker->time_ns;
    }
    return moments;
}

// Pinned host and managed memory, as the recorder counted them.
void count_pinned_and_managed(ProcessModel& model) {
    const format::Accounting& accounting = model.header.accounting;
    const auto pinned = static_cast<size_t>(MemoryKind::PinnedHost);
    const auto managed = static_cast<size_t>(MemoryKind::Managed);
    for (uint32_t slot = 0; slot < format::kAccountingSlots; ++slot) {
        model.peak_pinned_host = std::max(model.peak_pinned_host, accounting.peak_bytes[slot][pinned]);
        model.final_pinned_host += accounting.live_bytes[slot][pinned];
        model.peak_managed = std::max(model.peak_managed, accounting.peak_bytes[slot][managed]);
    }
}

// The failures by the time (the trace's clock) and size of their events, as the replay meets them.
FailuresByTimeSize by_time_and_size(std::vector<FailureSummary>& failures, const TraceHeader& header) {
    FailuresByTimeSize by_time_size;
    for (FailureSummary& failure : failures)
        by_time_size[{failure.time_ns + header.start_monotonic_ns, failure.bytes}] = &failure;
    return by_time_size;
}

// The timeline's samples, which cover the time before the ring's oldest event and carry host RSS.
std::vector<TimelinePoint> sampled_points(const TraceReader& trace, const ProcessModel& model) {
    std::vector<TimelinePoint> samples;
    samples.reserve(trace.timeline().size());
    for (const TimelineSample& sample : trace.timeline()) {
        TimelinePoint point{since_start(sample.time_ns, model.header), 0, 0, sample.rss_bytes, {}};
        for (uint32_t kind = 0; kind < format::kKindCount; ++kind) {
            if (counts_as_reserved(static_cast<MemoryKind>(kind)))
                point.reserved += sample.kind_bytes[kind];
        }
        point.allocated =
            model.reports_blocks ? sample.kind_bytes[static_cast<size_t>(MemoryKind::Block)] : point.reserved;
        for (const std::optional<TimelineSample::DriverSaid>& said : sample.driver_said)
            if (said)
                point.driver_used = point.driver_used.value_or(0) + said->used_bytes;
        samples.push_back(point);
    }
    return samples;
}

// Whether more than one device ever held memory: each then has a timeline of its own, where one that held
// all of it has the process's.
bool several_devices_held_memory(const format::Accounting& accounting) {
    uint64_t slots_holding = 0;
    for (uint32_t slot = 0; slot < format::kAccountingSlots; ++slot) {
        bool holds = accounting.peak_bytes[slot][static_cast<size_t>(MemoryKind::Block)] != 0;
        for (uint32_t kind = 0; kind < format::kKindCount; ++kind)
            holds |=
                counts_as_reserved(static_cast<MemoryKind>(kind)) && accounting.peak_bytes[slot][kind] != 0;
        slots_holding += holds ? 1 : 0;
    }
    return slots_holding > 1;
}

// What the recorder counted of the device of ordinal `slot` and what its driver said; none where it never
// held memory and its driver was never asked.
std::optional<DeviceSummary> counted_on_device(const TraceHeader& header, uint32_t slot) {
    const format::Accounting& accounting = header.accounting;
    DeviceSummary device;
    device.device = static_cast<int>(slot);
    uint64_t any = 0;
    for (uint32_t kind = 0; kind < format::kKindCount; ++kind) {
        if (counts_as_reserved(static_cast<MemoryKind>(kind))) {
            device.peak_reserved = std::max(device.peak_reserved, accounting.peak_bytes[slot][kind]);
            device.final_reserved += accounting.live_bytes[slot][kind];
        }
        any |= accounting.peak_bytes[slot][kind];
    }
    const format::DeviceMemoryView& view = header.device_memory[slot];
    if (view.total_bytes != 0) {
        device.capacity = view.total_bytes;
        device.lowest_free = view.lowest_free_bytes;
        device.peak_used_by_driver = view.total_bytes - view.lowest_free_bytes;
    }
    if (any == 0 && view.total_bytes == 0)
        return std::nullopt;
    return device;
}

// The timeline's samples of the device of ordinal `slot`: its peak, its own timeline into `memory` where
// it has one, and what its driver said was used.
void add_device_samples(const TraceReader& trace, const ProcessModel& model, uint32_t slot,
                        DeviceThinner* memory, DeviceSummary& device) {
    TimeThinner<DriverUsedPoint, &DriverUsedPoint::bytes> driver_used(model.duration_ns);
    for (const TimelineSample& sample : trace.timeline()) {
        const uint64_t reserved = sample.device_bytes[slot];
        device.peak_reserved = std::max(device.peak_reserved, reserved);
        if (memory != nullptr)
            memory->add({since_start(sample.time_ns, model.header), reserved,
                         model.reports_blocks ? sample.device_block_bytes[slot] : reserved});
        if (const std::optional<TimelineSample::DriverSaid>& said = sample.driver_said[slot])
            driver_used.add({since_start(said->time_ns, model.header), said->used_bytes});
    }
    device.driver_used = driver_used.finish();
}

// A device that ever held reserved or allocated memory, or whose driver was asked: `totals` those the
// replay left, `own_timelines` each device's from the replay (null: the process's is the device's).
std::optional<DeviceSummary> summarize_device(const TraceReader& trace, const ProcessModel& model,
                                              uint32_t slot, const Totals& totals,
                                              DeviceTimelines* own_timelines) {
    std::optional<DeviceSummary> device = counted_on_device(model.header, slot);
    if (!device)
        return std::nullopt;
    DeviceThinner* memory = own_timelines != nullptr ? &own_timelines->thinner(slot) : nullptr;
    device->peak_reserved = std::max(device->peak_reserved, totals.peak_reserved(device->device));
    add_device_samples(trace, model, slot, memory, *device);
    if (memory != nullptr) {
        device->timeline = memory->finish();
    } else {
        for (const TimelinePoint& point : model.timeline)
            device->timeline.push_back({point.time_ns, point.reserved, point.allocated});
    }
    const format::Accounting& accounting = model.header.accounting;
    const auto block = static_cast<size_t>(MemoryKind::Block);
    if (model.reports_blocks) {
        device->peak_allocated = accounting.peak_bytes[slot][block];
        device->final_allocated = accounting.live_bytes[slot][block];
    } else {
        device->peak_allocated = device->peak_reserved;
        device->final_allocated = device->final_reserved;
    }
    return device;
}

// The growing sites the program holds, in the order of leak_sites: most bytes first.
std::vector<size_t> growth_sites_of(const std::vector<LeakSite>& leak_sites) {
    std::vector<size_t> growth;
    for (size_t i = 0; i < leak_sites.size(); ++i)
        if (leak_sites[i].growing && !leak_sites[i].segments)
            growth.push_back(i);
    return growth;
}

// What makes the figures less than exact, and the ring's wrapping among the warnings.
void measure_exactness(const TraceReader& trace, ProcessModel& model) {
    Exactness& exactness = model.exactness;
    exactness.untracked = model.header.counters.live_untracked;
    exactness.live_capacity = model.header.live_capacity;
    exactness.stacks_dropped = model.header.counters.stacks_dropped;
    exactness.strings_dropped = model.header.counters.strings_dropped;
    exactness.notable_dropped = trace.notable_events().dropped;
    exactness.reentry_dropped = model.header.counters.reentry_dropped;
    exactness.reentry_dropped_notes = model.header.counters.reentry_dropped_notes;
    for (const SpilledSite& spilled : trace.live_allocations().spilled) {
        SpilledCount& of_kind = exactness.spilled_by_kind[spilled.kind];
        of_kind.count += spilled.count;
        of_kind.bytes += spilled.bytes;
    }
    if (model.events_overwritten > 0)
        model.warnings.push_back(
            fmt::format("the event ring wrapped: the oldest {} of {} events were overwritten "
                        "(the live set and totals are still exact)",
                        model.events_overwritten, model.events));
}

// ModelDetail::Allocations: every live allocation and ring event, and the site of each of their stacks.
void keep_allocations(const TraceReader& trace, const SiteKeys& site_keys, ProcessModel& model) {
    model.live_allocations = trace.live_allocations().allocations;
    model.spilled_allocations = trace.live_allocations().spilled;
    model.ring_events = trace.events().events;
    for (const LiveAllocation& live : model.live_allocations)
        model.site_of_stack.try_emplace(live.stack_id, site_keys.of(live.stack_id));
    for (const SpilledSite& spilled : model.spilled_allocations)
        model.site_of_stack.try_emplace(spilled.stack_id, site_keys.of(spilled.stack_id));
    for (const Event& event : model.ring_events)
        model.site_of_stack.try_emplace(event.stack_id, site_keys.of(event.stack_id));
}

// The sites at the peak the replay found: a second replay, as far back as the peak. Where the ring wrapped,
// the highest total it reaches may not be the peak the accounting counted.
std::optional<Moment> sites_at_peak(const TraceReader& trace, const SiteKeys& site_keys,
                                    const ProcessModel& model, const AllocatedPeak& peak) {
    uint64_t counted_peak = 0;
    for (const DeviceSummary& device : model.devices)
        counted_peak = std::max(counted_peak, device.peak_allocated);
    if (peak.bytes == 0 || (model.events_overwritten > 0 && peak.bytes < counted_peak))
        return std::nullopt;
    std::vector<Moment> at_peak(1);
    at_peak.front().label = "the peak";
    at_peak.front().time_ns = peak.time_ns;
    at_peak.front().after_sequence = peak.after_sequence;
    FailuresByTimeSize no_failures;
    Replay replay(model.reports_blocks, at_peak, no_failures);
    replay_backwards(trace, model, site_keys, replay,
                     [&](uint64_t time_ns, const Totals&, int) { return time_ns >= peak.time_ns; });
    if (!at_peak.front().reached)
        return std::nullopt;
    // Of what it held then, what the peak counts: allocated device memory.
    std::erase_if(at_peak.front().sites, [&](const LiveSiteAt& site) {
        return model.reports_blocks ? site.kind != MemoryKind::Block : !counts_as_reserved(site.kind);
    });
    return std::move(at_peak.front());
}

} // namespace

bool says_out_of_memory(const ProgramError& error) {
    std::string message = error.message;
    std::transform(message.begin(), message.end(), message.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    return error.type.ends_with("OutOfMemoryError") || error.type.ends_with("ResourceExhaustedError") ||
           message.find("out of memory") != std::string::npos ||
           message.find("resource_exhausted") != std::string::npos;
}

uint64_t site_of(const ProcessModel& model, uint32_t stack_id) {
    const auto site = model.site_of_stack.find(stack_id);
    return site != model.site_of_stack.end() ? site->second : stack_id;
}

const DeviceSummary* device_summary(const ProcessModel& model, int device) {
    const auto found = std::find_if(model.devices.begin(), model.devices.end(),
                                    [&](const DeviceSummary& summary) { return summary.device == device; });
    return found != model.devices.end() ? &*found : nullptr;
}

const DeviceContext* context_on(const ProcessModel& model, int device) {
    const auto found = std::find_if(model.contexts.begin(), model.contexts.end(),
                                    [&](const DeviceContext& context) { return context.device == device; });
    return found != model.contexts.end() ? &*found : nullptr;
}

std::vector<int> devices_used(const ProcessModel& model) {
    std::vector<int> devices;
    for (const DeviceSummary& summary : model.devices)
        if (summary.peak_reserved > 0)
            devices.push_back(summary.device);
    for (const DeviceContext& context : model.contexts)
        devices.push_back(context.device);
    std::sort(devices.begin(), devices.end());
    devices.erase(std::unique(devices.begin(), devices.end()), devices.end());
    return devices;
}

bool program_holds(const ProcessModel& model, MemoryKind kind) {
    return is_memory_held(kind) && !(model.reports_blocks && is_segment_kind(kind));
}

ProcessModel build_model(const std::string& path, const TraceReader& trace, ModelDetail detail,
                         const std::vector<std::string>& moments) {
    ProcessModel model = start_model(path, trace);
    model.markers = collect_markers(trace);
    model.moments = moments_asked(moments, model.markers);
    count_pinned_and_managed(model);
    model.failures = collect_failures(trace, model.header);
    model.failed_allocations = model.failures.size();
    FailuresByTimeSize failures_by_time_size = by_time_and_size(model.failures, model.header);
    const std::vector<TimelinePoint> samples = sampled_points(trace, model);
    model.host = build_host_memory(trace);
    model.forks = fork_records(trace);
    const SiteKeys site_keys(trace);
    const bool several_devices = several_devices_held_memory(model.header.accounting);
    DeviceTimelines device_timelines(model.duration_ns);
    Replay replay(model.reports_blocks, model.moments, failures_by_time_size);
    model.timeline = build_timeline(trace, model, site_keys, samples, replay,
                                    several_devices ? &device_timelines : nullptr);
    model.first_step_end_ns = first_step_end(trace, replay);
    // After the replay: the ring's torn count, among the reader's warnings, comes from it.
    model.warnings = trace.warnings();
    find_program_errors(trace, model);
    find_contexts(trace, model);
    for (uint32_t slot = 0; slot < format::kMaxDevices; ++slot)
        if (std::optional<DeviceSummary> device = summarize_device(
                trace, model, slot, replay.totals, several_devices ? &device_timelines : nullptr))
            model.devices.push_back(std::move(*device));
    find_leak_sites(trace, site_keys, model);
    model.thread_start_stacks = collect_thread_start_stacks(trace, model.failures);
    model.growth_sites = growth_sites_of(model.leak_sites);
    add_retainers(trace, site_keys, model);
    measure_exactness(trace, model);
    if (detail == ModelDetail::Allocations) {
        keep_allocations(trace, site_keys, model);
        model.peak = sites_at_peak(trace, site_keys, model, replay.peak);
    }
    return model;
}

const char* retainer_moment_name(RetainerMoment moment) {
    static constexpr NameTable kNames({{RetainerMoment::OutOfMemory, "out_of_memory"},
                                       {RetainerMoment::PhaseEnd, "phase_end"},
                                       {RetainerMoment::Exit, "exit"},
                                       {RetainerMoment::OnDemand, "on_demand"}},
                                      RetainerMoment::OnDemand);
    return kNames[moment];
}

const HostPoint* code_end_host_point(const ProcessModel& model) {
    const std::vector<HostPoint>& points = model.host.points;
    auto end = points.end();
    if (model.code_end_ns)
        end = std::find_if(points.begin(), points.end(),
                           [&](const HostPoint& point) { return point.time_ns > *model.code_end_ns; });
    // A Python program's samples that read no sys.modules after some that did were taken as it tore down:
    // finalizing empties sys.modules, and frees the program's objects. It is seen only at the sample after
    // it began, if at all (one quicker than a sample's interval is not, where nothing allocates then).
    const auto read = std::find_if(std::make_reverse_iterator(end), points.rend(),
                                   [](const HostPoint& point) { return point.python_modules > 0; });
    if (read != points.rend())
        return &*read;
    if (end != points.begin())
        return &*std::prev(end);
    return model.host.last();
}

namespace {

uint64_t end_monotonic_ns(const ProcessModel& model) {
    return model.header.start_monotonic_ns + model.duration_ns;
}

TraceLineage lineage_of(const ProcessModel& model) {
    return TraceLineage{model.path,        model.header.hostname,           model.header.pid,
                        model.header.ppid, model.header.start_monotonic_ns, model.header.parent_trace};
}

bool command_line_holds(const ProcessModel& model, const std::string& text) {
    return std::any_of(model.header.command_line.begin(), model.header.command_line.end(),
                       [&](const std::string& argument) { return argument.find(text) != std::string::npos; });
}

// Not a copy of its parent (whose trace a forked child names): an exec'd image.
bool new_image(const ProcessModel& model) {
    return model.header.parent_trace.empty();
}

// An interpreter that multiprocessing's spawn started. Other new images a multiprocessing child or a
// DataLoader worker starts (a tool run from a Pool's task, from a dataset) carry their stacks too.
bool spawned_interpreter(const ProcessModel& model) {
    return new_image(model) && command_line_holds(model, "multiprocessing.spawn import spawn_main");
}

// The parent's fork of `child`: the last fork of its pid before the child's trace began.
const ForkRecord* fork_of(const ProcessModel& parent, const ProcessModel& child) {
    const ForkRecord* found = nullptr;
    for (const ForkRecord& fork : parent.forks)
        if (fork.child_pid == child.header.pid && fork.monotonic_ns <= child.header.start_monotonic_ns)
            found = &fork;
    return found;
}

// Whether `model` is a child of multiprocessing's fork server.
bool forked_by_fork_server(const ProcessModel* parent, const ProcessModel& model) {
    return parent != nullptr && !new_image(model) &&
           command_line_holds(*parent, "multiprocessing.forkserver import main");
}

// One of a DataLoader's workers: it read its own id in its loop, or its parent's record of it says so (a
// copy of the parent or a spawned interpreter). A fork server's child has only the first: the server's
// stack holds none of the DataLoader's frames.
bool dataloader_worker(const ProcessModel& model, const ForkRecord* fork) {
    if (model.header.target && model.header.target->dataloader_worker_id)
        return true;
    return fork != nullptr && fork->origin == format::ForkOrigin::DataLoader &&
           (!new_image(model) || spawned_interpreter(model));
}

// The rank `model` is in its job, if it is one: the distributed launcher's RANK, else, in a Slurm job of
// several tasks, its task (srun started the program itself). Not a rank's own workers, which inherit its
// environment, nor a launcher whose children are the ranks (torchrun's agent, run as one Slurm task a
// machine).
struct JobRank {
    int rank;
    int local_rank;
    int world_size;
};

std::optional<JobRank> job_rank(const ProcessModel& model, const ProcessModel* parent,
                                const std::vector<ProcessModel*>& models) {
    const TraceHeader& header = model.header;
    if (header.rank >= 0) {
        if (parent != nullptr && parent->header.rank == header.rank)
            return std::nullopt;
        return JobRank{header.rank, header.local_rank, header.world_size};
    }
    if (header.slurm_task < 0 || header.slurm_tasks <= 1 ||
        (parent != nullptr && parent->header.slurm_task == header.slurm_task))
        return std::nullopt;
    for (const ProcessModel* other : models)
        if (other->header.rank >= 0 && is_child(lineage_of(*other), lineage_of(model)))
            return std::nullopt;
    return JobRank{header.slurm_task, header.slurm_local_task, header.slurm_tasks};
}

} // namespace

void assign_roles(std::vector<ProcessModel*>& models) {
    for (ProcessModel* model : models) {
        ProcessRole& role = model->role;
        role = ProcessRole{};
        role.node_rank = model->header.node_rank;
        for (size_t i = 0; i < models.size(); ++i)
            if (models[i] != model && is_child(lineage_of(*model), lineage_of(*models[i])))
                role.parent = i;
        const ProcessModel* parent = role.parent ? models[*role.parent] : nullptr;
        // The parent records a fork when it forks and a vfork child when it execs (spawn): a new image
        // with no fork record of its own is one its parent started by other means (posix_spawn).
        const ForkRecord* fork = parent != nullptr ? fork_of(*parent, *model) : nullptr;
        if (fork != nullptr)
            role.start_stack_id = fork->stack_id;
        if (new_image(*model) && command_line_holds(*model, "multiprocessing.resource_tracker import main")) {
            role.kind = RoleKind::ResourceTracker;
        } else if (new_image(*model) &&
                   command_line_holds(*model, "multiprocessing.forkserver import main")) {
            role.kind = RoleKind::ForkServer;
        } else if (const std::optional<JobRank> rank = job_rank(*model, parent, models)) {
            role.kind = RoleKind::Rank;
            role.rank = rank->rank;
            role.local_rank = rank->local_rank;
            role.world_size = rank->world_size;
        } else if (dataloader_worker(*model, fork)) {
            role.kind = RoleKind::DataLoaderWorker;
            role.start_method = new_image(*model)                       ? StartMethod::Spawn
                                : forked_by_fork_server(parent, *model) ? StartMethod::Forkserver
                                                                        : StartMethod::Fork;
            // The worker read its id from its own frames, once it ran its loop.
            if (model->header.target && model->header.target->dataloader_worker_id) {
                role.worker_id = model->header.target->dataloader_worker_id;
                continue;
            }
            // Else, as a DataLoader starts its workers in the order of their ids, each alive until the
            // iterator is done with them: this one's id is how many of the same loader's were still
            // alive. A loader starts all its workers one way, and multiprocessing's resource tracker,
            // which the first spawned worker starts, is none of them.
            int alive = 0;
            for (const ForkRecord& sibling : parent->forks) {
                if (&sibling == fork || sibling.stack_id != fork->stack_id ||
                    sibling.monotonic_ns > fork->monotonic_ns)
                    continue;
                for (const ProcessModel* other : models)
                    if (other->header.pid == sibling.child_pid && fork_of(*parent, *other) == &sibling &&
                        dataloader_worker(*other, &sibling) && new_image(*other) == new_image(*model) &&
                        end_monotonic_ns(*other) > fork->monotonic_ns)
                        ++alive;
            }
            role.worker_id = alive;
        } else if (fork != nullptr && fork->origin == format::ForkOrigin::Multiprocessing &&
                   !new_image(*model)) {
            role.kind = RoleKind::ForkedWorker;
            role.start_method =
                forked_by_fork_server(parent, *model) ? StartMethod::Forkserver : StartMethod::Fork;
        } else if (spawned_interpreter(*model)) {
            role.kind = RoleKind::SpawnedChild;
            role.start_method = StartMethod::Spawn;
        } else if (fork != nullptr && !new_image(*model)) {
            role.kind = RoleKind::ForkedChild;
        }
    }
}

const char* pool_owner_name(PoolOwner owner) {
    static constexpr NameTable kNames({{PoolOwner::None, "none"},
                                       {PoolOwner::Jax, "jax"},
                                       {PoolOwner::TensorFlow, "tensorflow"},
                                       {PoolOwner::Unknown, "unknown"}},
                                      PoolOwner::None);
    return kNames[owner];
}

void mark_framework_allocators(ProcessModel& model,
                               const std::function<AllocatorFrames(uint32_t stack_id)>& frames_of) {
    bool tensorflow = false;
    bool xla = false;
    // A framework keeps pools of pinned host memory too (TensorFlow's for its copies), grown the same way.
    for (LeakSite& site : model.leak_sites) {
        const AllocatorFrames frames = frames_of(site.stack_id);
        site.pool = frames.pool;
        model.tensorflow_per_tensor = model.tensorflow_per_tensor || frames.tensorflow_per_tensor;
        tensorflow = tensorflow || frames.pool == PoolOwner::TensorFlow || frames.tensorflow_per_tensor;
        xla = xla || frames.xla;
    }
    model.tensorflow_xla = tensorflow && xla;
    // A pool grows by regions, each made where the framework next needed one, so at sites of their own:
    // whether it grew through the program's work is judged on them all, as a site's survivors are.
    uint64_t first = UINT64_MAX;
    uint64_t last = 0;
    uint64_t regions = 0;
    for (const LeakSite& site : model.leak_sites) {
        if (!site.device_pool())
            continue;
        model.pool_grew_through_work = model.pool_grew_through_work || site.growing;
        regions += site.count;
        if (site.program_events.second > 0) {
            first = std::min(first, site.program_events.first);
            last = std::max(last, site.program_events.second);
        }
    }
    model.pool_grew_through_work =
        model.pool_grew_through_work ||
        (regions >= kMinGrowingCount && first < last && model.program_events > 0 &&
         static_cast<double>(last - first) >= kGrowthShare * static_cast<double>(model.program_events));
    std::erase_if(model.growth_sites,
                  [&](size_t index) { return model.leak_sites[index].pool != PoolOwner::None; });
}

} // namespace gpuleak::analyzer
