#include "repetition.h"

#include <algorithm>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <unordered_map>
#include <utility>

#include "process_model.h"
#include "thread_starts.h"

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
        return known->second =
                   differs != first.end() && other != second.end() && differs->function == other->function;
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

// The newest survivors of a site that are looked at: repetitions between the last steps of a loop are
// seen as well as between its first, and the pass over the ring takes memory in proportion to the sites,
// not to the events.
constexpr size_t kMostSurvivorsLookedAt = 17;

// What the pass knows of one site: its newest survivors, oldest first, where each was made, and which
// gaps between consecutive ones showed a repetition.
struct SiteSurvivors {
    std::vector<uint64_t> sequences;
    std::vector<PositionId> positions; // kUnknownPosition until the pass meets the allocation
    std::vector<bool> repeated;        // gap i: between sequences[i] and sequences[i + 1]
    Repetitions found;
};

// One pass over the ring, newest first, from the newest survivor looked at down to the oldest. A
// transient (an allocation freed within a gap) is weighed against the survivor that closes the gap,
// which the pass met before it. An allocation without Python frames stands where the next older one with
// Python frames stands: it and the checks that need it wait until the pass meets that one.
class RepetitionPass {
  public:
    RepetitionPass(const TraceReader& trace, std::vector<SiteSurvivors>& sites, uint64_t enough)
        : trace_(trace), positions_(trace), sites_(sites), enough_(enough) {
        for (size_t site = 0; site < sites_.size(); ++site)
            for (size_t index = 0; index < sites_[site].sequences.size(); ++index) {
                survivor_at_[sites_[site].sequences[index]] = {site, index};
                oldest_ = std::min(oldest_, sites_[site].sequences[index]);
                newest_ = std::max(newest_, sites_[site].sequences[index]);
            }
    }

    void run() {
        if (survivor_at_.empty())
            return;
        trace_.visit_events_newest_first([&](const Event& event) {
            if (event.sequence > newest_)
                return true;
            if (event.sequence < oldest_ && waiting_survivors_.empty() && waiting_gaps_.empty())
                return false;
            if (event.type == EventType::Free && event.sequence > oldest_)
                frees_[{event.address, event.kind}] = event.sequence;
            else if (event.type == EventType::Alloc)
                allocation(event);
            return true;
        });
    }

  private:
    struct Place {
        size_t site;
        size_t index;
    };

    void allocation(const Event& event) {
        const PositionId position = positions_.of(event);
        if (position != kAtLastPythonCall)
            place_waiting(position);
        if (const auto survivor = survivor_at_.find(event.sequence); survivor != survivor_at_.end()) {
            if (position == kAtLastPythonCall)
                waiting_survivors_.push_back(survivor->second);
            else
                sites_[survivor->second.site].positions[survivor->second.index] = position;
        }
        const auto free = frees_.find({event.address, event.kind});
        if (free == frees_.end())
            return;
        const uint64_t freed = free->second;
        frees_.erase(free);
        for (size_t site = 0; site < sites_.size(); ++site) {
            const std::vector<uint64_t>& sequences = sites_[site].sequences;
            const auto after = std::upper_bound(sequences.begin(), sequences.end(), freed);
            if (after == sequences.begin() || after == sequences.end())
                continue;
            const auto gap = static_cast<size_t>(after - sequences.begin()) - 1;
            // Made after the survivor before the gap (after its first survivor, for the first gap).
            if (event.sequence <= sequences[gap == 0 ? 0 : gap - 1] || sites_[site].repeated[gap])
                continue;
            if (position == kAtLastPythonCall)
                waiting_gaps_.push_back({site, gap});
            else
                weigh(site, gap, position);
        }
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
        if (survivors.repeated[gap] || survivors.found.seen >= enough_ || position == kUnknownPosition ||
            closing == kUnknownPosition || closing == kAtLastPythonCall ||
            !positions_.another_call_of_the_same_function(position, closing))
            return;
        survivors.repeated[gap] = true;
        ++survivors.found.seen;
    }

    const TraceReader& trace_;
    Positions positions_;
    std::vector<SiteSurvivors>& sites_;
    const uint64_t enough_;
    std::unordered_map<uint64_t, Place> survivor_at_;
    uint64_t oldest_ = std::numeric_limits<uint64_t>::max();
    uint64_t newest_ = 0;
    // Frees met, waiting for the allocation they freed.
    std::map<std::pair<uint64_t, MemoryKind>, uint64_t> frees_;
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
        if (held.size() > kMostSurvivorsLookedAt)
            held.erase(held.begin(), held.end() - kMostSurvivorsLookedAt);
        if (held.size() < 3) {
            held.clear();
            continue;
        }
        sites[site].found.known = true;
        sites[site].positions.assign(held.size(), kUnknownPosition);
        sites[site].repeated.assign(held.size() - 1, false);
    }
    RepetitionPass(trace, sites, enough).run();
    std::vector<Repetitions> found;
    for (const SiteSurvivors& site : sites)
        found.push_back(site.found);
    return found;
}

} // namespace gpuleak::analyzer
