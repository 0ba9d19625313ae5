// The report as text for a terminal: a screenful per process, the diagnosis first.
#pragma once

#include <string>
#include <vector>

#include "report.h"

namespace gpuleak::analyzer {

std::string render_text(std::vector<ProcessReport>& reports, const ReportOptions& options);

} // namespace gpuleak::analyzer
