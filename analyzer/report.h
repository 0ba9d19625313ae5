// A report: for each process, its model, the diagnosis and its stacks as source frames; what the
// renderers print. Built by report_builder from the trace files named on the command line.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "diagnosis.h"
#include "process_model.h"

namespace gpuleak::analyzer {

struct ReportFrame {
    std::string function; // demangled; empty when unknown
    std::string file;     // empty when unknown
    uint32_t line = 0;
    std::string module;
    uint64_t module_offset = 0;
    bool inlined = false; // inlined into the next (outer) frame
    bool python = false;
};

// Resolves the stacks of one trace to source frames, innermost first, without gpuleak's own frames.
class StackFrames {
  public:
    virtual ~StackFrames() = default;
    virtual const std::vector<ReportFrame>& frames(uint32_t stack_id) = 0;
    // A few words naming where a stack comes from: "keep_history (train.cpp:88)".
    std::string describe(uint32_t stack_id);
};

struct ProcessReport {
    ProcessModel model;
    Diagnosis diagnosis;
    std::unique_ptr<StackFrames> stacks;
};

struct ReportOptions {
    size_t top = 10;        // leak origins and failures listed per process
    uint64_t min_bytes = 0; // leak origins smaller than this are left out
    size_t stack_depth = 8; // frames shown per stack
    bool color = false;
};

} // namespace gpuleak::analyzer
