#include "report/report_set.h"

#include <utility>

namespace gpuleak::analyzer {

ReportSet::ReportSet(std::vector<ProcessReport> whole) : reports_(std::move(whole)) {}

ReportSet::ReportSet(std::vector<ProcessReport> summaries, Remake remake)
    : reports_(std::move(summaries)), remake_(std::move(remake)) {}

ProcessReport& ReportSet::whole(size_t process) {
    if (!remake_)
        return reports_.at(process);
    if (remade_index_ != process) {
        // The one made before is dropped first: two whole reports are never held at once.
        remade_ = ProcessReport{};
        remade_index_.reset();
        remade_ = remake_(process, reports_.at(process));
        remade_index_ = process;
    }
    return remade_;
}

} // namespace gpuleak::analyzer
