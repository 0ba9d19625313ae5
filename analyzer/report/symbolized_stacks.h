// StackFrames for one trace: its return addresses through the symbolizer, gpuleak's own frames left out,
// and its Python frames among them.
#pragma once

#include <map>
#include <memory>
#include <stop_token>

#include "python/named_sources.h"
#include "python/python_stacks.h"
#include "python/source_files.h"
#include "read/trace_reader.h"
#include "report/report.h"
#include "symbols/symbolizer.h"

namespace gpuleak::analyzer {

class SymbolizedStacks : public StackFrames {
  public:
    // `modules`: shared with the other traces of the report, whose processes load the same libraries.
    SymbolizedStacks(const TraceReader& trace, std::shared_ptr<ModuleRegistry> modules);
    const std::vector<ReportFrame>& frames(uint32_t stack_id) override;

    // Reads the debug info of the modules the stacks pass through (Symbolizer::read_ahead), for a
    // second thread to do while the model is built; nothing else may use this object meanwhile.
    void read_ahead(const std::stop_token& stop);

  private:
    std::map<uint32_t, std::vector<uint64_t>> addresses_;
    PythonStacks python_;
    NamedSources named_;
    SourceFiles files_;
    Symbolizer symbolizer_;
    std::map<uint32_t, std::vector<ReportFrame>> cache_;
};

} // namespace gpuleak::analyzer
