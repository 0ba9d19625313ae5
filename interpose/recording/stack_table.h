// Interning of call stacks: each distinct stack is written to the trace once and referred to by id.
// Looking up a known stack takes no lock; adding a new one (rare after warm-up) takes one.
#pragma once

#include <cstdint>

#include "recording/spin_lock.h"
#include "recording/trace_writer.h"

namespace gpuleak {

class StackTable {
  public:
    bool attach(TraceWriter& writer);
    void detach();

    // The id of the stack of native `frames[0..count)` and Python frames `python[0..python_count)`
    // (both innermost first), adding it when new (`added` tells). 0 when the stack did not fit in the
    // file or the index: the event is kept without its stack.
    uint32_t intern(const uint64_t* frames, uint32_t count, const format::PythonFrameRecord* python,
                    uint32_t python_count, bool& added);

  private:
    struct Entry {
        uint64_t hash; // 0 = empty; published last
        uint32_t id;
        uint32_t offset_words; // record offset in the stacks region / 8
    };
    bool matches(const Entry& entry, const uint64_t* frames, uint32_t count,
                 const format::PythonFrameRecord* python, uint32_t python_count) const;

    TraceWriter* writer_ = nullptr;
    Entry* entries_ = nullptr;
    uint64_t entry_count_ = 0; // power of two
    uint64_t used_ = 0;
    uint32_t next_id_ = 1;
    SpinLock insert_lock_;
    uint64_t private_bytes_ = 0;
};

} // namespace gpuleak
