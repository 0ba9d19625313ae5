// Threads meeting in the recorder: nothing lost, torn or misattributed when many threads allocate at
// once, and the recorder starting exactly once when its first calls race.
#include <catch2/catch.hpp>

#include <map>
#include <optional>
#include <sstream>

#include "allocation_views.h"
#include "read/trace_reader.h"
#include "traced_run.h"

using gpuleak::analyzer::Event;
using gpuleak::analyzer::TraceReader;
using gpuleak::format::EndState;
using gpuleak::format::EventType;
using gpuleak::format::MemoryKind;

namespace {

size_t count_of(const std::string& text, const std::string& part) {
    size_t count = 0;
    for (size_t at = text.find(part); at != std::string::npos; at = text.find(part, at + 1))
        ++count;
    return count;
}

// Each thread of many_threads makes alloc/free pairs of one object at a time, with its kept
// allocations in between: in the thread's own order every free must name the allocation just before
// it. Returns a description of the first event that breaks this, empty when none does. Only the first
// event of a thread may be a free without its allocation (the ring kept the latest events only).
std::string first_out_of_order(const std::vector<Event>& events, const LiveMap& kept) {
    struct ThreadState {
        std::optional<Event> open; // an allocation of a pair, waiting for its free
        bool seen = false;
    };
    std::map<uint32_t, ThreadState> threads;
    auto describe = [](const char* problem, const Event& event) {
        std::ostringstream out;
        out << problem << ": event " << event.sequence << " (" << gpuleak::format::event_type_name(event.type)
            << " 0x" << std::hex << event.address << std::dec << " size " << event.size << ") of thread "
            << event.thread_id;
        return out.str();
    };
    for (const Event& event : events) {
        ThreadState& thread = threads[event.thread_id];
        const bool first = !thread.seen;
        thread.seen = true;
        if (event.type == EventType::Alloc) {
            auto found = kept.find(event.address);
            if (found != kept.end() && found->second == Held{event.size, event.thread_id})
                continue;
            if (thread.open)
                return describe("a second allocation before the free of the first", event);
            thread.open = event;
        } else if (event.type == EventType::Free) {
            if (!thread.open) {
                if (!first)
                    return describe("a free without its allocation", event);
                continue;
            }
            if (event.address != thread.open->address || event.size != thread.open->size)
                return describe("a free of another object than the one just allocated", event);
            thread.open.reset();
        } else {
            return describe("an event the program did not cause", event);
        }
    }
    return {};
}

} // namespace

TEST_CASE("eight threads making 100k calls each lose no event and leave the exact live set") {
    constexpr int kThreads = 8;
    constexpr int kPairs = 50000;
    constexpr int kKept = 20;
    TempDir dir;
    const std::string log = dir.path() + "/program.log";
    const TracedRun run =
        run_traced(dir, program_path("many_threads"),
                   {log, std::to_string(kThreads), std::to_string(kPairs), std::to_string(kKept)});
    INFO(run.err);
    REQUIRE(run.exited_with(0));
    const std::vector<LogLine> lines = read_log(log);
    const LogLine calls_line = find_line(lines, "calls");
    REQUIRE(calls_line.size() == 2);
    const uint64_t calls = log_number(calls_line[1]);
    REQUIRE(calls == uint64_t{kThreads} * (2 * kPairs + kKept));
    const auto views = process_views(lines);
    REQUIRE(views.size() == 1);
    const LiveMap& left = views.begin()->second.live;
    REQUIRE(left.size() == size_t{kThreads} * kKept);

    REQUIRE(run.traces().size() == 1);
    const TraceReader trace = TraceReader::open(run.traces()[0]);
    const auto& header = trace.header();
    CHECK(header.counters.ring_head == calls);
    const auto& ring = trace.events();
    CHECK(ring.torn == 0);
    CHECK(ring.events.size() + ring.dropped == header.counters.ring_head);
    // More events than the ring holds: the ring wrapped and kept exactly the latest ones.
    CHECK(ring.dropped == calls - header.ring_capacity);
    bool contiguous = true;
    for (size_t i = 0; i < ring.events.size(); ++i)
        contiguous = contiguous && ring.events[i].sequence == ring.dropped + i;
    CHECK(contiguous);
    CHECK(first_out_of_order(ring.events, left) == "");

    CHECK(live_difference(left, live_of(trace)) == "");
    CHECK(trace.live_allocations().invalid_slots == 0);
    CHECK(header.counters.live_untracked == 0);
    CHECK(header.counters.free_unknown == 0);
    CHECK(header.accounting.live_bytes[0][static_cast<size_t>(MemoryKind::Device)] == total_size(left));
    CHECK(accounted_live_bytes(trace) == total_size(left));
    CHECK(header.end.state == EndState::Exited);
    CHECK(header.end.exit_code == 0);
}

TEST_CASE("threads racing to make the first CUDA calls of a process are all recorded in one trace") {
    constexpr int kThreads = 16;
    // Each run is one chance for the race to go wrong: a few runs, each a fresh process.
    for (int attempt = 0; attempt < 5; ++attempt) {
        INFO("run " << attempt);
        TempDir dir;
        const std::string log = dir.path() + "/program.log";
        const TracedRun run = run_traced(dir, program_path("startup_race"), {log, std::to_string(kThreads)});
        INFO(run.err);
        REQUIRE(run.exited_with(0));
        const auto views = process_views(read_log(log));
        REQUIRE(views.size() == 1);
        const ProcessView& view = views.begin()->second;
        REQUIRE(view.live.size() == size_t{kThreads});
        CHECK(count_of(run.err, "gpuleak: recording GPU memory") == 1);

        REQUIRE(run.traces().size() == 1);
        const TraceReader trace = TraceReader::open(run.traces()[0]);
        CHECK(trace.header().pid == views.begin()->first);
        CHECK(trace.header().counters.ring_head == view.calls);
        CHECK(trace.events().torn == 0);
        CHECK(trace.events().events.size() == view.calls);
        CHECK(live_difference(view.live, live_of(trace)) == "");
        CHECK(accounted_live_bytes(trace) == total_size(view.live));
    }
}
