// StackFrames for one trace: its return addresses through the symbolizer, gpuleak's own frames left out.
#pragma once

#include <map>
#include <memory>

#include "report.h"
#include "symbolizer.h"
#include "trace_reader.h"

namespace gpuleak::analyzer {

class SymbolizedStacks : public StackFrames {
  public:
    SymbolizedStacks(const TraceReader& trace, const std::string& debuginfo_path);
    const std::vector<ReportFrame>& frames(uint32_t stack_id) override;

  private:
    std::map<uint32_t, std::vector<uint64_t>> addresses_;
    Symbolizer symbolizer_;
    std::map<uint32_t, std::vector<ReportFrame>> cache_;
};

} // namespace gpuleak::analyzer
