// The Python code objects that stacks hold: each is written to the trace once, as a CodeRecord with
// its file, qualified name, first line and line table, and referred to by id. Looking up a known code
// object takes no lock: a few loads to check that the object at that address is still the same one.
// Adding one (rare after warm-up) takes one.
#pragma once

#include <cstdint>

#include "python/python_code_object.h"
#include "python/python_frame.h"
#include "python/python_runtime.h"
#include "recording/spin_lock.h"
#include "recording/trace_writer.h"

namespace gpuleak {

// Python frames described while their code objects were alive (the calling thread's, captured in the same
// call), for a trace to record later, when those code objects may be gone: where a Python thread was
// started before the program used CUDA, told at the thread's first allocation. One block of the heap.
struct DescribedFrames;
// Null without Python frames to read, or without memory.
DescribedFrames* describe_frames(const PythonFrame* frames, uint32_t count);
void release_described_frames(DescribedFrames* described);

class PythonCodeTable {
  public:
    bool attach(TraceWriter& writer);
    void detach();

    // The trace's record of each of `frames`: its code object's id, added when new (0 when the code
    // object cannot be read or did not fit in the file or the index), its instruction offset and flag.
    // Only for the calling thread's Python stack captured in the same hook call: those code objects are
    // alive (see python_code_object.h).
    void records_of(const PythonFrame* frames, uint32_t count, format::PythonFrameRecord* records);

    // The same for frames of another thread's stack (capture_waiting_python_frames): their code objects
    // are read through the kernel, as that thread may free them meanwhile.
    void records_of_other_thread(const PythonFrame* frames, uint32_t count,
                                 format::PythonFrameRecord* records);

    // The trace's records of frames described earlier, as many as `described` holds (returned): each code
    // object gets a record of its own, outside the index, as its address may hold another one by now.
    uint32_t records_of_described(const DescribedFrames& described, format::PythonFrameRecord* records);

    // A thread's memory of the code objects it met last (python_code_table.cpp).
    struct RecentCodes;

  private:
    struct Entry {
        uint64_t address; // 0 = empty; published last
        PythonCodeIdentity identity;
        uint32_t id;
    };
    // Where the code object is: on the calling thread's stack, read with plain loads, or on another's.
    enum class Owner { this_thread, other_thread };
    uint32_t add(uint64_t code_object, const PythonCodeIdentity& identity, uint64_t position, Owner owner);
    // Appends a code record of `description` under the insert lock: its id, 0 where it did not fit.
    uint32_t append_record(uint64_t code_object, const PythonCodeDescription& description,
                           const char* filename, const char* qualname, const uint8_t* line_table);
    uint32_t find_or_add(uint64_t code_object, const PythonCodeIdentity& identity, Owner owner);
    // The id of the entry for this code object from `position` on, or 0 with `position` at the empty
    // entry that ends the probe.
    uint32_t probe(uint64_t code_object, const PythonCodeIdentity& identity, uint64_t& position) const;

    TraceWriter* writer_ = nullptr;
    Entry* entries_ = nullptr;
    uint64_t entry_count_ = 0; // power of two
    uint64_t used_ = 0;
    uint32_t next_id_ = 1;
    // Bumped by every attach: the threads' caches of ids (python_code_table.cpp) hold ids of one trace.
    uint32_t generation_ = 0;
    SpinLock insert_lock_;
};

} // namespace gpuleak
