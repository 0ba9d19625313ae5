// A report: for each process, its model, the diagnosis and its stacks as source frames; what the
// renderers print. Built by report_builder from the trace files named on the command line.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "model/diagnosis.h"
#include "model/process_model.h"

namespace gpuleak::analyzer {

struct JobFacts;     // job_facts.h
struct SharedDevice; // shared_devices.h

struct ReportFrame {
    std::string function; // demangled, or a Python frame's qualified name; empty when unknown
    std::string file;     // empty when unknown
    uint32_t line = 0;    // 0 when unknown
    std::string module;   // empty for a Python frame
    uint64_t module_offset = 0;
    bool inlined = false; // inlined into the next (outer) frame
    bool python = false;
    // A Python frame of a source the program named (named_sources.h): what it is called ("cell [12]");
    // empty otherwise.
    std::string source_name;
    // A Python frame of the program's own code: the text of its line, from the source the program named
    // or the file on disk (source_files.h); empty when unknown, and for a library's frame.
    std::string source_line;
};

// Resolves the stacks of one trace to source frames, innermost first, without gpuleak's own frames: the
// native frames with the Python frames among them (python_interleave.h).
class StackFrames {
  public:
    virtual ~StackFrames() = default;
    virtual const std::vector<ReportFrame>& frames(uint32_t stack_id) = 0;
    // A few words naming where a stack comes from: "keep_history (train.cpp:88)", or for a stack with
    // Python frames its innermost one: "train.py:88 in train_epoch"; with what a library keeps its memory
    // for (library_purpose) where `purpose`.
    virtual std::string describe(uint32_t stack_id, bool purpose = true);
    // The stack that started the thread `stack_id` was made on (ProcessModel::thread_start_stacks); 0 when
    // none was recorded.
    [[nodiscard]] uint32_t thread_start_of(uint32_t stack_id) const;
    // The model's thread_start_stacks, set once the model is built.
    std::map<uint32_t, uint32_t> thread_start_stacks;
};

struct ProcessReport {
    ProcessModel model;
    Diagnosis diagnosis;
    std::unique_ptr<StackFrames> stacks;
    // Where its parent started it, named by the parent's stack then (StackFrames::describe); empty when
    // its parent's trace does not say.
    std::string started_at;
    // The function multiprocessing started it to run (ProcessTarget), as a Python frame at the first line
    // of its definition; none where it was not read.
    std::optional<ReportFrame> target;
    // The job the run's ranks make, the same in each of its processes' reports; none where the run has
    // fewer than two ranks.
    std::shared_ptr<const JobFacts> job;
    // The devices that several of the run's processes used, the same in each report; none where none.
    std::shared_ptr<const std::vector<SharedDevice>> shared_devices;
};

struct ReportOptions {
    size_t top = 10;         // leak origins and failures listed per process
    uint64_t min_bytes = 0;  // leak origins smaller than this are left out
    size_t stack_depth = 8;  // frames shown per stack (stack_view.h)
    bool native = false;     // every native frame of a Python program's stacks, not only the innermost
    bool full_names = false; // native functions with their parameter lists
    bool color = false;
    bool live_blocks = false; // JSON: each leak origin's live allocations, address and size
};

} // namespace gpuleak::analyzer
