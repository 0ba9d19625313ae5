// The report as JSON (schema "gpuleak-report/1", documented in the README): what other tools and later
// renderers build on.
#pragma once

#include <nlohmann/json.hpp>
#include <vector>

#include "report.h"

namespace gpuleak::analyzer {

nlohmann::json render_json(std::vector<ProcessReport>& reports, const ReportOptions& options);

} // namespace gpuleak::analyzer
