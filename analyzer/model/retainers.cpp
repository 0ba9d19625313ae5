#include "model/retainers.h"

#include <algorithm>
#include <fmt/format.h>
#include <iterator>
#include <map>
#include <nlohmann/json.hpp>
#include <string_view>

namespace gpuleak::analyzer {

namespace {

using nlohmann::json;

// The document is the process's own writing, but a trace is read as untrusted input: every field is
// checked for its type, and a document that breaks the shape below is not half-read.
struct Malformed {
    const char* what;
};

const json& member(const json& object, const char* name, json::value_t type) {
    const auto found = object.find(name);
    if (found == object.end() || found->type() != type)
        throw Malformed{name};
    return *found;
}

std::string text(const json& object, const char* name) {
    return member(object, name, json::value_t::string).get<std::string>();
}

uint64_t count(const json& object, const char* name) {
    const auto found = object.find(name);
    if (found == object.end() || !found->is_number_unsigned())
        throw Malformed{name};
    return found->get<uint64_t>();
}

double number(const json& object, const char* name) {
    const auto found = object.find(name);
    if (found == object.end() || !found->is_number())
        throw Malformed{name};
    return found->get<double>();
}

std::vector<std::string> texts(const json& object, const char* name) {
    std::vector<std::string> values;
    for (const json& value : member(object, name, json::value_t::array)) {
        if (!value.is_string())
            throw Malformed{name};
        values.push_back(value.get<std::string>());
    }
    return values;
}

format::MemoryKind kind_named(const std::string& name) {
    for (uint8_t kind = 0; kind < format::kKindCount; ++kind)
        if (name == format::kind_name(static_cast<format::MemoryKind>(kind)))
            return static_cast<format::MemoryKind>(kind);
    throw Malformed{"kind"};
}

RetainerMoment moment_named(const std::string& name) {
    for (const RetainerMoment moment : {RetainerMoment::OutOfMemory, RetainerMoment::PhaseEnd,
                                        RetainerMoment::Exit, RetainerMoment::OnDemand})
        if (name == retainer_moment_name(moment))
            return moment;
    throw Malformed{"moment"};
}

// [[site, bytes], ...] or, with `paths`, [[site, bytes, path], ...]; each site an index into the document's
// sites.
std::vector<SiteShare> shares(const json& object, const char* name, size_t sites, bool paths) {
    std::vector<SiteShare> values;
    for (const json& entry : member(object, name, json::value_t::array)) {
        if (!entry.is_array() || entry.size() != (paths ? 3U : 2U) || !entry[0].is_number_unsigned() ||
            !entry[1].is_number_unsigned() || entry[0].get<uint64_t>() >= sites ||
            (paths && !entry[2].is_string()))
            throw Malformed{name};
        values.push_back(
            {entry[0].get<size_t>(), entry[1].get<uint64_t>(), paths ? entry[2].get<std::string>() : ""});
    }
    return values;
}

RetainerSnapshot parse_snapshot(const std::string& document) {
    const json root = json::parse(document, nullptr, false);
    if (!root.is_object())
        throw Malformed{"the document"};
    RetainerSnapshot snapshot;
    snapshot.moment = moment_named(text(root, "moment"));
    if (snapshot.moment == RetainerMoment::OutOfMemory) {
        const uint64_t device = count(root, "device");
        if (device > INT16_MAX)
            throw Malformed{"device"};
        snapshot.device = static_cast<int>(device);
    }
    snapshot.seconds = number(root, "seconds");
    snapshot.objects = count(root, "objects_searched");
    snapshot.stopped = member(root, "stopped", json::value_t::boolean).get<bool>();
    snapshot.problem = text(root, "problem");
    // Absent from the documents of packages that read them always.
    if (root.contains("saved_tensors_read"))
        snapshot.saved_tensors_read = member(root, "saved_tensors_read", json::value_t::boolean).get<bool>();
    for (const json& site : member(root, "sites", json::value_t::array)) {
        const uint64_t stack_id = count(site, "stack_id");
        if (stack_id > UINT32_MAX)
            throw Malformed{"stack_id"};
        snapshot.sites.push_back(
            {static_cast<uint32_t>(stack_id), kind_named(text(site, "kind")), count(site, "bytes"), {}});
    }
    for (const json& holder : member(root, "holders", json::value_t::array)) {
        Retainer retainer;
        retainer.root = text(holder, "root");
        retainer.kind = text(holder, "kind");
        retainer.bytes = count(holder, "bytes");
        retainer.tensors = count(holder, "tensors");
        retainer.sites = shares(holder, "sites", snapshot.sites.size(), true);
        retainer.path = text(holder, "path");
        retainer.through = texts(holder, "through");
        // Absent from the documents of packages older than the record at exit.
        if (holder.contains("saved"))
            retainer.saved = shares(holder, "saved", snapshot.sites.size(), false);
        if (const auto graph = holder.find("graph"); graph != holder.end() && !graph->is_null()) {
            if (!graph->is_object())
                throw Malformed{"graph"};
            retainer.graph =
                KeptGraph{text(*graph, "path"),          count(*graph, "nodes"),   count(*graph, "passes"),
                          count(*graph, "spent_passes"), count(*graph, "address"), count(*graph, "bytes")};
            retainer.graph->spent_by_one = graph->contains("spent_by_one") ? count(*graph, "spent_by_one")
                                                                           : retainer.graph->spent_passes;
        }
        retainer.own = text(holder, "own");
        if (holder.contains("owner")) {
            retainer.owner = text(holder, "owner");
            retainer.models = count(holder, "models");
        }
        retainer.advice = texts(holder, "advice");
        snapshot.holders.push_back(std::move(retainer));
    }
    snapshot.unreached = shares(root, "unreached", snapshot.sites.size(), false);
    return snapshot;
}

// The out-of-memory error a record at `time_ns` by `thread` on `device` was taken at: the latest one of
// that thread and device before it that has no record yet (the thread that failed searched before it
// raised the error).
std::optional<size_t> failure_of(const ProcessModel& model, uint64_t time_ns, uint32_t thread, int device) {
    for (size_t i = model.failures.size(); i-- > 0;) {
        const FailureSummary& failure = model.failures[i];
        if (failure.time_ns <= time_ns && failure.out_of_memory() && failure.thread_id == thread &&
            failure.device == device && !failure.retainers)
            return i;
    }
    return std::nullopt;
}

// Each leak site's holders in the latest record that searched for it (none where that record found
// nothing holding it).
void tie_to_sites(ProcessModel& model) {
    std::vector<bool> told(model.leak_sites.size(), false);
    for (size_t snapshot_index = model.retainers.size(); snapshot_index-- > 0;) {
        const RetainerSnapshot& snapshot = model.retainers[snapshot_index];
        if (!snapshot.problem.empty())
            continue;
        std::vector<bool> named(model.leak_sites.size(), false);
        for (const RetainedSite& site : snapshot.sites)
            if (site.leak_site && !told[*site.leak_site])
                named[*site.leak_site] = true;
        for (size_t holder = 0; holder < snapshot.holders.size(); ++holder) {
            const std::vector<SiteShare>& shares = snapshot.holders[holder].sites;
            for (size_t share = 0; share < shares.size(); ++share)
                if (const std::optional<size_t> leak = snapshot.sites[shares[share].site].leak_site;
                    leak && named[*leak])
                    model.leak_sites[*leak].held_by.push_back(
                        {snapshot_index, holder, share, shares[share].bytes});
        }
        for (size_t leak = 0; leak < named.size(); ++leak) {
            if (!named[leak])
                continue;
            told[leak] = true;
            std::vector<HeldBy>& held_by = model.leak_sites[leak].held_by;
            std::stable_sort(held_by.begin(), held_by.end(),
                             [](const HeldBy& a, const HeldBy& b) { return a.bytes > b.bytes; });
        }
    }
}

// The sites the latest record at the program's exit found held through tensors autograd saved by holders
// whose graphs join passes, and how much of each, by the holder of the most.
void find_kept_for_backward(ProcessModel& model) {
    for (size_t snapshot_index = model.retainers.size(); snapshot_index-- > 0;) {
        const RetainerSnapshot& snapshot = model.retainers[snapshot_index];
        if (snapshot.moment != RetainerMoment::Exit || !snapshot.problem.empty())
            continue;
        std::map<size_t, KeptForBackward> by_site;
        std::map<size_t, uint64_t> most_of_one_holder;
        for (size_t holder = 0; holder < snapshot.holders.size(); ++holder) {
            if (!snapshot.holders[holder].graph || snapshot.holders[holder].graph->passes < kMinPasses)
                continue;
            for (const SiteShare& share : snapshot.holders[holder].saved) {
                const std::optional<size_t> leak = snapshot.sites[share.site].leak_site;
                if (!leak || model.leak_sites[*leak].segments)
                    continue;
                KeptForBackward& kept = by_site[*leak];
                kept.site = *leak;
                kept.snapshot = snapshot_index;
                kept.bytes += share.bytes;
                if (const auto most = most_of_one_holder.find(*leak);
                    most == most_of_one_holder.end() || share.bytes > most->second) {
                    most_of_one_holder[*leak] = share.bytes;
                    kept.holder = holder;
                }
            }
        }
        for (const auto& [site, kept] : by_site)
            model.kept_for_backward.push_back(kept);
        std::stable_sort(
            model.kept_for_backward.begin(), model.kept_for_backward.end(),
            [](const KeptForBackward& a, const KeptForBackward& b) { return a.bytes > b.bytes; });
        return;
    }
}

// The leak site of the program's (not a sub-allocator's segments, which hold its blocks) whose live block
// holds `address`, if any.
std::optional<size_t> site_holding(const ProcessModel& model, uint64_t address) {
    for (size_t i = 0; i < model.leak_sites.size(); ++i) {
        if (model.leak_sites[i].segments)
            continue;
        const std::vector<LiveBlock>& blocks = model.leak_sites[i].blocks;
        auto after =
            std::upper_bound(blocks.begin(), blocks.end(), address,
                             [](uint64_t value, const LiveBlock& block) { return value < block.address; });
        if (after != blocks.begin() && address - std::prev(after)->address < std::prev(after)->size)
            return i;
    }
    return std::nullopt;
}

// The spent graphs of the latest record, whose tensors are still live at the end: an older record's
// address may be another block's by the end, the allocator having reused it.
void find_spent_graphs(ProcessModel& model) {
    for (size_t snapshot_index = model.retainers.size(); snapshot_index-- > 0;) {
        const RetainerSnapshot& snapshot = model.retainers[snapshot_index];
        if (!snapshot.problem.empty())
            continue;
        for (size_t holder = 0; holder < snapshot.holders.size(); ++holder) {
            const std::optional<KeptGraph>& graph = snapshot.holders[holder].graph;
            // One tensor that joins the passes: a sum of losses, not a list of them (each its own graph).
            if (!graph || graph->spent_by_one < kMinSpentPasses || graph->address == 0)
                continue;
            if (const std::optional<size_t> site = site_holding(model, graph->address))
                model.spent_graphs.push_back({*site, snapshot_index, holder});
        }
        const auto passes = [&](const SpentGraph& spent) {
            return model.retainers[spent.snapshot].holders[spent.holder].graph->spent_passes;
        };
        std::stable_sort(model.spent_graphs.begin(), model.spent_graphs.end(),
                         [&](const SpentGraph& a, const SpentGraph& b) { return passes(a) > passes(b); });
        return;
    }
}

// The parameters, buffers and gradients of one model, or the state of one optimizer, that one name holds:
// the program's working set, made once however its making spread over the program's events.
bool holds_a_working_set(const Retainer& holder) {
    constexpr std::string_view kOwn[] = {"parameter", "buffer", "gradient", "optimizer state"};
    const auto own = [&](const std::string& fact) {
        return std::find(std::begin(kOwn), std::end(kOwn), fact) != std::end(kOwn);
    };
    return !holder.owner.empty() && holder.models <= 1 && holder.kind != "traceback" &&
           !holder.through.empty() && std::all_of(holder.through.begin(), holder.through.end(), own);
}

// Objects one at a time, each with memory of its own, that only a loop makes: many models (a search that
// keeps every trial's), or small slices that each keep a base tensor of their own (a view per step).
bool accumulates(const Retainer& holder) {
    constexpr uint64_t kMinAccumulated = 3;
    return holder.models >= kMinAccumulated ||
           (holder.tensors >= kMinAccumulated &&
            std::find(holder.through.begin(), holder.through.end(), "view") != holder.through.end());
}

// A site spread over the program's work whose repetitions were not seen (a loop that makes nothing but
// what it keeps) grows where the latest record naming it found a holder that accumulates, holding at
// least half of it.
void add_accumulated_to_growth(ProcessModel& model) {
    for (size_t index = 0; index < model.leak_sites.size(); ++index) {
        LeakSite& site = model.leak_sites[index];
        if (site.growing || !site.spread_over_work || site.segments)
            continue;
        for (const HeldBy& held : site.held_by)
            if (2 * held.bytes >= site.bytes &&
                accumulates(model.retainers[held.snapshot].holders[held.holder])) {
                site.growing = true;
                model.growth_sites.insert(
                    std::upper_bound(model.growth_sites.begin(), model.growth_sites.end(), index), index);
                break;
            }
    }
}

// A growing site that the latest record naming it found held only as working sets, at least half of it
// (what the record did not reach may be what grows), is not growing.
void leave_working_sets_out_of_growth(ProcessModel& model) {
    std::erase_if(model.growth_sites, [&](size_t index) {
        LeakSite& site = model.leak_sites[index];
        uint64_t held_bytes = 0;
        for (const HeldBy& held : site.held_by) {
            if (!holds_a_working_set(model.retainers[held.snapshot].holders[held.holder]))
                return false;
            held_bytes += held.bytes;
        }
        if (site.held_by.empty() || 2 * held_bytes < site.bytes)
            return false;
        site.growing = false;
        return true;
    });
}

} // namespace

void add_retainers(const TraceReader& trace, const SiteKeys& site_keys, ProcessModel& model) {
    // The leak sites by their site (site_keys.h) and kind: what a record's stacks are matched with.
    std::map<std::pair<uint64_t, format::MemoryKind>, size_t> leak_sites;
    for (size_t i = 0; i < model.leak_sites.size(); ++i)
        leak_sites.emplace(std::pair{site_keys.of(model.leak_sites[i].stack_id), model.leak_sites[i].kind},
                           i);
    for (const Event& event : trace.notable_events().events) {
        if (event.type != format::EventType::Retainers)
            continue;
        const uint64_t time_ns = since_start(event.time_ns, model.header);
        const std::string* label = trace.string(event.retainers_label());
        const std::string* document = trace.string(event.retainers_document());
        if (label == nullptr || document == nullptr) {
            model.warnings.push_back(
                fmt::format("a record of what held the memory at {:.2f} s lost its text in the trace",
                            seconds_of(time_ns)));
            continue;
        }
        try {
            RetainerSnapshot snapshot = parse_snapshot(*document);
            snapshot.time_ns = time_ns;
            snapshot.label = *label;
            for (RetainedSite& site : snapshot.sites) {
                const auto found = leak_sites.find({site_keys.of(site.stack_id), site.kind});
                if (found != leak_sites.end())
                    site.leak_site = found->second;
            }
            if (snapshot.device)
                snapshot.failure = failure_of(model, time_ns, event.thread_id, *snapshot.device);
            if (snapshot.failure)
                model.failures[*snapshot.failure].retainers = model.retainers.size();
            model.retainers.push_back(std::move(snapshot));
        } catch (const Malformed& malformed) {
            model.warnings.push_back(fmt::format("the record of what held the memory at {:.2f} s ({}) is not "
                                                 "gpuleak.why()'s: its {} is missing or wrong",
                                                 seconds_of(time_ns), *label, malformed.what));
        }
    }
    tie_to_sites(model);
    add_accumulated_to_growth(model);
    leave_working_sets_out_of_growth(model);
    find_kept_for_backward(model);
    find_spent_graphs(model);
}

} // namespace gpuleak::analyzer
