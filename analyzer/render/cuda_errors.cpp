#include "render/cuda_errors.h"

#include "model/process_model.h"

namespace gpuleak::analyzer {

std::string cuda_error_meaning(int32_t error) {
    // cudaError_t and CUresult agree on these (driver_types.h, cuda.h); 201 is the runtime's
    // cudaErrorDeviceUninitialized and the driver's CUDA_ERROR_INVALID_CONTEXT, the same thing.
    switch (error) {
    case 1:
        return "invalid value";
    case FailureSummary::kOutOfMemoryError:
        return "out of memory";
    case 3:
        return "CUDA not initialized";
    case 4:
        return "CUDA shutting down";
    case 34:
        return "no CUDA driver: the stub library answered";
    case 35:
        return "the CUDA driver is older than the runtime";
    case 46:
        return "device busy or unavailable";
    case 100:
        return "no CUDA device";
    case 101:
        return "invalid device";
    case 201:
        return "invalid or destroyed context";
    case 401:
        return "illegal state";
    case 700:
        return "illegal memory access: a kernel faulted earlier, and the context is unusable";
    case 800:
        return "not permitted";
    case 801:
        return "not supported";
    case 999:
        return "unknown error";
    default:
        return {};
    }
}

} // namespace gpuleak::analyzer
