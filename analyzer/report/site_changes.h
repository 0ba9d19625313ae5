// What changed between two states of the program's memory: two moments of one run (its markers), or
// the ends of two runs (two trials, before and after a fix). Sites are matched by their frames as the
// report shows them, so that the same line is one site in two traces: by their Python frames where they
// have some (site_keys.h), else by their native frames, and by kind.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "report/report.h"

namespace gpuleak::analyzer {

// The same for the same site in two traces of one program: the file, function and line of each of its
// Python frames, or of each frame where it has none, and its kind.
std::string site_identity(StackFrames& stacks, uint32_t stack_id, format::MemoryKind kind);

// One state: a process report, and what its sites held then.
struct MemoryState {
    ProcessReport* report = nullptr;
    std::optional<uint64_t> marker_ns; // the marker's time, since the start; none: the process's end
    std::string label;                 // the marker's label, or the trace's path
    std::vector<LiveSiteAt> sites;     // of what the program holds
};

// What the process held at its end: its leak sites, without a sub-allocator's segments.
MemoryState state_at_end(ProcessReport& report);

struct SiteChange {
    format::MemoryKind kind = format::MemoryKind::None;
    std::optional<LiveSiteAt> before; // none: the site held nothing then
    std::optional<LiveSiteAt> after;
    [[nodiscard]] int64_t change() const;
    [[nodiscard]] uint64_t magnitude() const; // of change(), grown or shrunk
};

struct Comparison {
    MemoryState before;
    MemoryState after;
    std::vector<SiteChange> changes; // the largest change first, grown or shrunk; unchanged sites left out
    uint64_t before_bytes = 0;
    uint64_t after_bytes = 0;
};

Comparison compare(MemoryState before, MemoryState after);

// The changes a report lists: of at least `min_bytes` either way, the largest `top`.
std::vector<const SiteChange*> shown_changes(const Comparison& comparison, const ReportOptions& options);

} // namespace gpuleak::analyzer
