// What multiprocessing started this process to run, read by another thread (the sampler's) from the frames
// of the process's first Python thread: the function BaseProcess.run calls (a Process's target, a Pool's
// worker loop, a DataLoader's _worker_loop), or the run method of a Process subclass that overrides it,
// and a DataLoader worker's id, the worker_id argument of that loop. A spawned interpreter's command line
// says none of this, and a forked child's is its parent's.
//
// The thread read runs on meanwhile: every read goes through the kernel (copy_checked) and fails where
// the memory is gone, and what is read is checked (object types, a chain that ends). Its frames from
// BaseProcess._bootstrap outwards do not change while the target runs. A walk costs a few system calls a
// frame.
#pragma once

#include <cstdint>
#include <optional>

namespace gpuleak {

struct PythonProcessTarget {
    // UTF-8, filename_size and qualname_size bytes, no terminator; one byte less than the trace keeps.
    char filename[511];
    char qualname[255]; // co_name on 3.10, which has no qualified names
    uint32_t filename_size = 0;
    uint32_t qualname_size = 0;
    int32_t first_line = 0;
    std::optional<int64_t> dataloader_worker_id;
};

// True once the process's first Python thread runs its target: `target` then says what it is. False
// before (a spawned interpreter still importing), in a process that multiprocessing did not start,
// without a supported Python, while it finalizes, and where a read failed (try again later).
bool find_python_process_target(PythonProcessTarget& target);

} // namespace gpuleak
