// A process report of a trace parsed from memory (TraceReader::parse, "trace.bin"), made the way
// build_reports makes one from a file: model, stacks without debug info from elsewhere, diagnosis.
#pragma once

#include <cstdint>
#include <memory>

#include "model/diagnosis.h"
#include "model/process_model.h"
#include "read/trace_reader.h"
#include "report/report.h"
#include "report/report_builder.h"
#include "report/symbolized_stacks.h"

namespace gpuleak::test {

inline analyzer::ProcessReport report_of(const analyzer::TraceReader& trace) {
    analyzer::ProcessReport report;
    report.model = analyzer::build_model("trace.bin", trace);
    report.stacks =
        std::make_unique<analyzer::SymbolizedStacks>(trace, std::make_shared<analyzer::ModuleRegistry>());
    analyzer::diagnose_report(report);
    return report;
}

} // namespace gpuleak::test
