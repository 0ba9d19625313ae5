#include "model/thread_starts.h"

#include "model/process_model.h"

namespace gpuleak::analyzer {

ThreadStarts::ThreadStarts(const TraceReader& trace) {
    for (const Event& event : trace.notable_events().events)
        if (event.type == format::EventType::ThreadStart)
            starts_[{event.thread_id, since_start(event.time_ns, trace.header())}] = event.stack_id;
}

uint32_t ThreadStarts::of(uint32_t thread_id, uint64_t time_ns) const {
    const auto after = starts_.upper_bound({thread_id, time_ns});
    if (after == starts_.begin())
        return 0;
    const auto& [key, start] = *std::prev(after);
    return key.first == thread_id ? start : 0;
}

} // namespace gpuleak::analyzer
