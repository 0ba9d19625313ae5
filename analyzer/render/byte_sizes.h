// Sizes as the report's words give them.
#pragma once

#include <cstdint>
#include <string>

namespace gpuleak::analyzer {

// "1.5 GiB", "512 B": the sizes the report prints.
std::string human_bytes(double bytes);
std::string human_bytes(uint64_t bytes);

} // namespace gpuleak::analyzer
