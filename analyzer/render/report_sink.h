// Where a renderer writes what it makes, a part at a time: a report of a thousand processes is written as
// each process's part is made, never held whole.
#pragma once

#include <functional>
#include <string_view>

namespace gpuleak::analyzer {

using ReportSink = std::function<void(std::string_view part)>;

} // namespace gpuleak::analyzer
