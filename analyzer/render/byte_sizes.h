// Sizes as the report's words give them.
#pragma once

#include <string>

namespace gpuleak::analyzer {

// "1.5 GiB", "512 B": the sizes the report prints.
std::string human_bytes(double bytes);

} // namespace gpuleak::analyzer
