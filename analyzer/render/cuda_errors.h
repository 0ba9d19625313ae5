// The CUDA errors of failed allocations in the report's words.
#pragma once

#include <cstdint>
#include <string>

namespace gpuleak::analyzer {

// What a CUDA error code of a failed allocation means, the same in the runtime and the driver API for
// the codes an allocation returns ("invalid value", "no driver"); empty for others.
std::string cuda_error_meaning(int32_t error);

} // namespace gpuleak::analyzer
