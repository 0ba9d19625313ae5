#include "report/site_changes.h"

#include <algorithm>
#include <map>

#include <fmt/format.h>

namespace gpuleak::analyzer {

namespace {

uint64_t total(const std::vector<LiveSiteAt>& sites) {
    uint64_t bytes = 0;
    for (const LiveSiteAt& site : sites)
        bytes += site.bytes;
    return bytes;
}

} // namespace

std::string site_identity(StackFrames& stacks, uint32_t stack_id, format::MemoryKind kind) {
    const std::vector<ReportFrame>& frames = stacks.frames(stack_id);
    const bool python =
        std::any_of(frames.begin(), frames.end(), [](const ReportFrame& f) { return f.python; });
    std::string identity = format::kind_name(kind);
    for (const ReportFrame& frame : frames) {
        if (python && !frame.python)
            continue;
        // A native frame without a function is known by its offset in its library, which a rebuild moves.
        const std::string library = frame.module.substr(frame.module.rfind('/') + 1);
        identity += frame.function.empty() ? fmt::format("\n{}+{:#x}", library, frame.module_offset)
                                           : fmt::format("\n{}\t{}\t{}\t{}", frame.function, frame.file,
                                                         frame.line, frame.python ? "" : library);
    }
    return identity;
}

MemoryState state_at_end(ProcessReport& report) {
    MemoryState state{&report, std::nullopt, report.model.path, {}};
    for (const LeakSite& site : report.model.leak_sites)
        if (!site.segments)
            state.sites.push_back({site.stack_id, site.kind, site.bytes, site.count});
    return state;
}

int64_t SiteChange::change() const {
    return static_cast<int64_t>(after ? after->bytes : 0) - static_cast<int64_t>(before ? before->bytes : 0);
}

uint64_t SiteChange::magnitude() const {
    const int64_t bytes = change();
    return static_cast<uint64_t>(bytes < 0 ? -bytes : bytes);
}

Comparison compare(MemoryState before, MemoryState after) {
    Comparison comparison;
    comparison.before_bytes = total(before.sites);
    comparison.after_bytes = total(after.sites);
    std::map<std::string, SiteChange> by_identity;
    const auto add = [&](const MemoryState& state, std::optional<LiveSiteAt> SiteChange::*side) {
        for (const LiveSiteAt& site : state.sites) {
            SiteChange& change = by_identity[site_identity(*state.report->stacks, site.stack_id, site.kind)];
            change.kind = site.kind;
            std::optional<LiveSiteAt>& held = change.*side;
            // Two stacks of one site in one trace (the same Python lines, other native frames) add up.
            if (held) {
                held->bytes += site.bytes;
                held->count += site.count;
            } else {
                held = site;
            }
        }
    };
    add(before, &SiteChange::before);
    add(after, &SiteChange::after);
    for (auto& [identity, change] : by_identity)
        if (change.change() != 0)
            comparison.changes.push_back(change);
    // The largest change first; equal changes in the order of their sites' identities (stable).
    std::stable_sort(comparison.changes.begin(), comparison.changes.end(),
                     [](const SiteChange& a, const SiteChange& b) { return a.magnitude() > b.magnitude(); });
    comparison.before = std::move(before);
    comparison.after = std::move(after);
    return comparison;
}

std::vector<const SiteChange*> shown_changes(const Comparison& comparison, const ReportOptions& options) {
    std::vector<const SiteChange*> shown;
    for (const SiteChange& change : comparison.changes) {
        if (shown.size() == options.top)
            break;
        if (change.magnitude() >= options.min_bytes)
            shown.push_back(&change);
    }
    return shown;
}

} // namespace gpuleak::analyzer
