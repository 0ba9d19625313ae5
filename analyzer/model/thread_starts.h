// Which stack started the thread that made an event (EventType::ThreadStart): the line of the program
// that started a library's thread (PyTorch's pin-memory thread) stands for what that thread makes.
#pragma once

#include <cstdint>
#include <map>
#include <utility>

#include "read/trace_reader.h"

namespace gpuleak::analyzer {

class ThreadStarts {
  public:
    explicit ThreadStarts(const TraceReader& trace);

    // The stack that started `thread_id` as it stood at `time_ns` (since the process's start); 0 where no
    // start was recorded, or the thread had ended.
    [[nodiscard]] uint32_t of(uint32_t thread_id, uint64_t time_ns) const;
    [[nodiscard]] bool empty() const { return starts_.empty(); }

  private:
    // A thread's id is another thread's once it ended: each start covers what its id made from then on,
    // to the thread's end (a record of stack 0), or to the next start. {thread, time} -> starting stack.
    std::map<std::pair<uint32_t, uint64_t>, uint32_t> starts_;
};

} // namespace gpuleak::analyzer
