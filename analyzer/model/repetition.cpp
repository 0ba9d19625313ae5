#include "model/repetition.h"

#include <algorithm>
#include <array>
#include <functional>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <unordered_map>
#include <utility>

#include "model/process_model.h"
#include "model/thread_starts.h"

namespace gpuleak::analyzer {

namespace {

using format::EventType;
using format::MemoryKind;

// One frame of where the program was, outermost first: a Python frame's function and instruction, or a
// native return address (function 0).
struct Call {
    uint32_t function = 0;
    uint64_t at = 0;
    auto operator<=>(const Call&) const = default;
};

// Where an allocation was made, interned: equal stacks of calls share an id.
using PositionId = uint32_t;
constexpr PositionId kUnknownPosition = std::numeric_limits<PositionId>::max();
// An allocation without Python frames in a program with them: it stands where the last one with Python
// frames made before it was made.
constexpr PositionId kAtLastPythonCall = kUnknownPosition - 1;

class Positions {
  public:
    explicit Positions(const TraceReader& trace)
        : trace_(trace), starts_(trace), python_program_(!trace.python_stacks().empty()) {
        // A function's code object may have been recorded under two ids (as the start of a thread and as a
        // stack's frame): one function, one number.
        std::map<std::tuple<std::string, std::string, int32_t>, uint32_t> functions;
        for (const auto& [id, code] : trace.code_objects())
            function_of_code_[id] =
                functions.try_emplace({code.filename, code.qualname, code.first_line}, functions.size() + 1)
                    .first->second;
    }

    [[nodiscard]] PositionId of(const Event& event) {
        const uint32_t start =
            starts_.empty() ? 0 : starts_.of(event.thread_id, since_start(event.time_ns, trace_.header()));
        const auto [known, added] = by_stack_.try_emplace({event.stack_id, start}, kUnknownPosition);
        if (added)
            known->second = position(event.stack_id, start);
        return known->second;
    }

    // From the outermost frame in, the first frame where the two differ is the same function at another
    // call site: the program went on from one call to another of a function both are in.
    [[nodiscard]] bool another_call_of_the_same_function(PositionId a, PositionId b) {
        const auto [known, added] = compared_.try_emplace((uint64_t{a} << 32) | b, false);
        if (!added)
            return known->second;
        const std::vector<Call>& first = positions_[a];
        const std::vector<Call>& second = positions_[b];
        const auto [differs, other] = std::mismatch(first.begin(), first.end(), second.begin(), second.end());
        // A native frame says no function: two return addresses are calls of one function where the frames
        // outside them are the same, which two threads' outermost frames are not.
        return known->second = differs != first.end() && other != second.end() &&
                               differs->function == other->function &&
                               (differs->function != 0 || differs != first.begin());
    }

  private:
    [[nodiscard]] PositionId position(uint32_t stack_id, uint32_t start) {
        // A stack cut at the depth limit lost its outermost frames: it cannot be lined up with another.
        const auto truncated = [&](size_t frames) {
            return trace_.header().stack_depth > 0 && frames >= trace_.header().stack_depth;
        };
        std::vector<Call> calls;
        if (python_program_) {
            const auto frames = trace_.python_stacks().find(stack_id);
            if (frames == trace_.python_stacks().end() || frames->second.empty())
                return kAtLastPythonCall;
            if (truncated(frames->second.size()) || !python_calls(start, calls, true) ||
                !python_calls(stack_id, calls, false))
                return kUnknownPosition;
        } else {
            const auto frames = trace_.stacks().find(stack_id);
            if (frames == trace_.stacks().end() || frames->second.empty() || truncated(frames->second.size()))
                return kUnknownPosition;
            for (auto address = frames->second.rbegin(); address != frames->second.rend(); ++address)
                calls.push_back({0, *address});
        }
        const auto [interned, added] =
            interned_.try_emplace(calls, static_cast<PositionId>(positions_.size()));
        if (added)
            positions_.push_back(std::move(calls));
        return interned->second;
    }

    // Appends the stack's Python frames, outermost first; false where a frame's code was not recorded.
    // A thread's start (`optional`) may have none to give.
    bool python_calls(uint32_t stack_id, std::vector<Call>& calls, bool optional) const {
        const auto frames = trace_.python_stacks().find(stack_id);
        if (frames == trace_.python_stacks().end())
            return optional;
        for (auto frame = frames->second.rbegin(); frame != frames->second.rend(); ++frame) {
            const auto function = function_of_code_.find(frame->code_id);
            if (function == function_of_code_.end())
                return false;
            calls.push_back({function->second, frame->instruction_offset});
        }
        return true;
    }

    const TraceReader& trace_;
    const ThreadStarts starts_;
    const bool python_program_;
    std::unordered_map<uint32_t, uint32_t> function_of_code_;      // code id -> its function's number, from 1
    std::map<std::pair<uint32_t, uint32_t>, PositionId> by_stack_; // {stack, its thread's start}
    std::map<std::vector<Call>, PositionId> interned_;
    std::vector<std::vector<Call>> positions_;
    std::unordered_map<uint64_t, bool> compared_;
};

// How many survivors of a site are looked at, spread evenly over those the ring holds, its oldest and its
// newest among them: repetitions between the last steps of a loop are seen as well as between its first,
// and a site whose every step keeps many allocations at once (the variables of a Keras model, which one
// compiled step writes anew) has gaps between steps among them, where its newest ones alone could all lie
// within the last step. The pass reads the ring only as far back as the sites need.
constexpr size_t kMostSurvivorsLookedAt = 17;

// What the pass knows of one site: the survivors looked at, oldest first, where each was made, and which
// gaps between consecutive ones showed a repetition.
struct SiteSurvivors {
    std::vector<uint64_t> sequences;
    std::vector<PositionId> positions; // kUnknownPosition until the pass meets the allocation
    // Per gap i, between sequences[i] and sequences[i + 1]: a repetition was seen; a transient was weighed
    // against the survivor that closes it; one could not be, where it or that survivor was made is not
    // known (a stack cut at the depth limit, a code object not recorded, no stacks kept).
    std::vector<bool> repeated;
    std::vector<bool> weighed;
    std::vector<bool> unplaced;
    Repetitions found;

    // Gaps that say something: their closing survivor placed, and a transient weighed or none unplaced.
    [[nodiscard]] size_t judged_gaps() const {
        size_t judged = 0;
        for (size_t gap = 0; gap < repeated.size(); ++gap)
            judged += positions[gap + 1] != kUnknownPosition && (weighed[gap] || !unplaced[gap]) ? 1 : 0;
        return judged;
    }
};

// One pass over the ring, newest first, from the newest survivor looked at down to the oldest. A
// transient (an allocation freed within a gap) is weighed against the survivor that closes the gap,
// which the pass met before it. Made where the pass is, after the survivor before a gap, and freed
// after that, within it: only the two gaps around the newest survivor the pass has not yet passed can
// take it, and a site is weighed only while one of those is still open. An allocation without Python
// frames stands where the next older one with Python frames stands: it and the checks that need it wait
// until the pass meets that one.
class RepetitionPass {
  public:
    RepetitionPass(const TraceReader& trace, std::vector<SiteSurvivors>& sites, uint64_t enough)
        : trace_(trace), positions_(trace), sites_(sites), enough_(enough), below_(sites.size(), 0),
          open_(sites.size(), false) {
        for (size_t site = 0; site < sites_.size(); ++site) {
            const std::vector<uint64_t>& sequences = sites_[site].sequences;
            if (sequences.empty())
                continue;
            ++left_;
            below_[site] = sequences.size();
            newest_ = std::max(newest_, sequences.back());
            for (size_t index = 0; index < sequences.size(); ++index)
                survivor_at_[sequences[index]] = {site, index};
        }
    }

    void run() {
        if (left_ == 0)
            return;
        trace_.visit_events_newest_first([&](const Event& event) {
            if (event.sequence > newest_)
                return true;
            if (left_ == 0 && waiting_survivors_.empty() && waiting_gaps_.empty())
                return false;
            if (event.type == EventType::Free)
                frees_[{event.address, event.kind}] = event.sequence;
            else if (event.type == EventType::Alloc)
                allocation(event);
            return true;
        });
        // What waited for an allocation with Python frames older than any the ring holds stays unplaced.
        for (const Place& gap : waiting_gaps_)
            sites_[gap.site].unplaced[gap.index] = true;
    }

  private:
    struct Place {
        size_t site;
        size_t index;
    };

    void allocation(const Event& event) {
        // Where it was made, only where something needs it: the stacks are looked up once each, the
        // thread's start is not.
        std::optional<PositionId> placed;
        const auto position_of = [&] {
            if (!placed) {
                placed = positions_.of(event);
                if (*placed != kAtLastPythonCall)
                    place_waiting(*placed);
            }
            return *placed;
        };
        if (!waiting_survivors_.empty() || !waiting_gaps_.empty())
            position_of();
        if (const auto survivor = survivor_at_.find(event.sequence); survivor != survivor_at_.end()) {
            const PositionId position = position_of();
            const auto [site, index] = survivor->second;
            if (position == kAtLastPythonCall)
                waiting_survivors_.push_back(survivor->second);
            else
                sites_[site].positions[index] = position;
            below_[site] = index;
            if (index == 0 && sites_[site].found.seen < enough_)
                --left_; // past it: what is made from here on is made before every gap
            reopen(site);
        }
        const auto free = frees_.find({event.address, event.kind});
        if (free == frees_.end())
            return;
        const uint64_t freed = free->second;
        frees_.erase(free);
        std::erase_if(opened_, [&](size_t site) { return !open_[site]; });
        for (const size_t site : opened_) {
            const size_t gap = gap_taking(site, event.sequence, freed);
            if (gap == kNoGap)
                continue;
            const PositionId position = position_of();
            if (position == kAtLastPythonCall)
                waiting_gaps_.push_back({site, gap});
            else
                weigh(site, gap, position);
        }
    }

    static constexpr size_t kNoGap = std::numeric_limits<size_t>::max();

    // The open gap of `site` that an allocation made at `made` and freed at `freed` falls in: freed
    // within it, made after the survivor before it (after its first survivor, for the first gap).
    [[nodiscard]] size_t gap_taking(size_t site, uint64_t made, uint64_t freed) const {
        const SiteSurvivors& survivors = sites_[site];
        const std::vector<uint64_t>& sequences = survivors.sequences;
        for (const size_t gap : candidate_gaps(site))
            if (gap != kNoGap && !survivors.repeated[gap] && sequences[gap] < freed &&
                freed < sequences[gap + 1] && made > sequences[gap == 0 ? 0 : gap - 1])
                return gap;
        return kNoGap;
    }

    // The gaps around the newest survivor of `site` the pass has not passed (kNoGap where there is none).
    [[nodiscard]] std::array<size_t, 2> candidate_gaps(size_t site) const {
        const size_t gaps = sites_[site].repeated.size();
        const size_t below = below_[site];
        return {below >= 1 && below - 1 < gaps ? below - 1 : kNoGap, below < gaps ? below : kNoGap};
    }

    // Whether `site` can take a transient where the pass is now.
    void reopen(size_t site) {
        const SiteSurvivors& survivors = sites_[site];
        bool open = false;
        if (survivors.found.seen < enough_ && below_[site] > 0)
            for (const size_t gap : candidate_gaps(site))
                open = open || (gap != kNoGap && !survivors.repeated[gap]);
        if (open && !open_[site])
            opened_.push_back(site);
        open_[site] = open;
    }

    // What waited for the next older allocation with Python frames stands where it stands.
    void place_waiting(PositionId position) {
        for (const Place& survivor : waiting_survivors_)
            sites_[survivor.site].positions[survivor.index] = position;
        waiting_survivors_.clear();
        for (const Place& gap : waiting_gaps_)
            weigh(gap.site, gap.index, position);
        waiting_gaps_.clear();
    }

    // A transient made at `position` and freed in the site's gap: a repetition where it was made at
    // another call of a function the survivor that closes the gap was made through.
    void weigh(size_t site, size_t gap, PositionId position) {
        SiteSurvivors& survivors = sites_[site];
        const PositionId closing = survivors.positions[gap + 1];
        if (survivors.repeated[gap] || survivors.found.seen >= enough_)
            return;
        if (position == kUnknownPosition || closing == kUnknownPosition) {
            survivors.unplaced[gap] = true;
            return;
        }
        survivors.weighed[gap] = true;
        if (!positions_.another_call_of_the_same_function(position, closing))
            return;
        survivors.repeated[gap] = true;
        if (++survivors.found.seen == enough_ && below_[site] > 0)
            --left_;
        reopen(site);
    }

    const TraceReader& trace_;
    Positions positions_;
    std::vector<SiteSurvivors>& sites_;
    const uint64_t enough_;
    std::unordered_map<uint64_t, Place> survivor_at_;
    uint64_t newest_ = 0;
    // Per site: how many of its survivors are older than where the pass is, and whether it is open.
    std::vector<size_t> below_;
    std::vector<bool> open_;
    std::vector<size_t> opened_; // the open sites, and some closed since (dropped as they are met)
    size_t left_ = 0;            // sites neither done nor passed
    // Frees met, waiting for the allocation they freed.
    struct FreeKey {
        uint64_t address;
        MemoryKind kind;
        bool operator==(const FreeKey&) const = default;
    };
    struct HashFreeKey {
        size_t operator()(const FreeKey& key) const {
            return std::hash<uint64_t>()(key.address ^ (static_cast<uint64_t>(key.kind) << 56));
        }
    };
    std::unordered_map<FreeKey, uint64_t, HashFreeKey> frees_;
    std::vector<Place> waiting_survivors_;
    std::vector<Place> waiting_gaps_;
};

} // namespace

std::vector<Repetitions> find_repetitions(const TraceReader& trace,
                                          const std::vector<std::vector<uint64_t>>& survivors,
                                          uint64_t program_events, uint64_t enough) {
    // Only what the ring still holds, of the program's own code.
    const uint64_t oldest = trace.events_dropped();
    std::vector<SiteSurvivors> sites(survivors.size());
    for (size_t site = 0; site < survivors.size(); ++site) {
        std::vector<uint64_t>& held = sites[site].sequences;
        for (uint64_t sequence : survivors[site])
            if (sequence >= oldest && sequence < program_events)
                held.push_back(sequence);
        std::sort(held.begin(), held.end());
        if (held.size() > kMostSurvivorsLookedAt) {
            std::vector<uint64_t> spread;
            for (size_t i = 0; i < kMostSurvivorsLookedAt; ++i)
                spread.push_back(held[i * (held.size() - 1) / (kMostSurvivorsLookedAt - 1)]);
            held = std::move(spread);
        }
        if (held.size() < 3) {
            held.clear();
            continue;
        }
        sites[site].positions.assign(held.size(), kUnknownPosition);
        sites[site].repeated.assign(held.size() - 1, false);
        sites[site].weighed.assign(held.size() - 1, false);
        sites[site].unplaced.assign(held.size() - 1, false);
    }
    RepetitionPass(trace, sites, enough).run();
    std::vector<Repetitions> found;
    for (SiteSurvivors& site : sites) {
        // Known where enough was seen, or enough gaps could be judged: a site whose stacks cannot be lined
        // up is left to the events' spread.
        site.found.known =
            !site.sequences.empty() && (site.found.seen >= enough || site.judged_gaps() >= enough);
        found.push_back(site.found);
    }
    return found;
}

} // namespace gpuleak::analyzer
