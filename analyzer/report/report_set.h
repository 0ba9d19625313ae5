// The process reports of a run, as the renderers read them. A run of a few processes keeps each report
// whole. Of many (a job's thousand ranks read directly), what is kept of each process must not grow with
// them: its summary, the report without what only its own section shows (its timelines, its live
// allocations, its stacks' frames), which the run's tables (ranks, processes, shared devices) read; and a
// renderer that comes to a process's own section gets its whole report, made again from its trace, one
// process at a time.
#pragma once

#include <cstddef>
#include <functional>
#include <optional>
#include <vector>

#include "report/report.h"

namespace gpuleak::analyzer {

class ReportSet {
  public:
    // Process `process`'s whole report, made again; `summary` is its summary.
    using Remake = std::function<ProcessReport(size_t process, const ProcessReport& summary)>;

    ReportSet() = default;
    // Reports kept whole.
    explicit ReportSet(std::vector<ProcessReport> whole);
    ReportSet(std::vector<ProcessReport> summaries, Remake remake);

    // Every process's report, whole or its summary: what the run's tables read.
    std::vector<ProcessReport>& all() { return reports_; }
    [[nodiscard]] size_t size() const { return reports_.size(); }
    [[nodiscard]] bool empty() const { return reports_.empty(); }
    // Whether all() holds summaries, each made whole by whole().
    [[nodiscard]] bool summarized() const { return static_cast<bool>(remake_); }
    // Process `process`'s whole report; the reference holds until the next call.
    ProcessReport& whole(size_t process);

  private:
    std::vector<ProcessReport> reports_;
    Remake remake_;
    std::optional<size_t> remade_index_;
    ProcessReport remade_;
};

} // namespace gpuleak::analyzer
