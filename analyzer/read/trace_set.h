// Which trace files a report covers: the files named, every trace in a directory named, and the traces
// of the children of each (forked workers name their parent's trace; exec'd children their parent's
// pid), found beside it.
#pragma once

#include <string>
#include <vector>

namespace gpuleak::analyzer {

// Throws TraceError (one line) when an argument names nothing readable or a directory holds no trace.
std::vector<std::string> collect_traces(const std::vector<std::string>& arguments);

} // namespace gpuleak::analyzer
