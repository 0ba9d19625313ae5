// Names and descriptions of the runtime's error codes, for those the simulated runtime can return.
#include "error_text.h"
#include "runtime_api.h"

namespace {

using gpuleak::sim::ErrorText;

constexpr ErrorText kErrors[] = {
    {cudaSuccess, "cudaSuccess", "no error"},
    {cudaErrorInvalidValue, "cudaErrorInvalidValue", "invalid argument"},
    {cudaErrorMemoryAllocation, "cudaErrorMemoryAllocation", "out of memory"},
    {cudaErrorInitializationError, "cudaErrorInitializationError", "initialization error"},
    {cudaErrorInsufficientDriver, "cudaErrorInsufficientDriver",
     "CUDA driver version is insufficient for CUDA runtime version"},
    {cudaErrorInvalidDevice, "cudaErrorInvalidDevice", "invalid device ordinal"},
    {cudaErrorSymbolNotFound, "cudaErrorSymbolNotFound", "named symbol not found"},
    // Driver failures that reach the caller with their number unchanged, under their runtime names.
    {CUDA_ERROR_INVALID_CONTEXT, "cudaErrorDeviceUninitialized", "invalid device context"},
    {CUDA_ERROR_INVALID_HANDLE, "cudaErrorInvalidResourceHandle", "invalid resource handle"},
    {CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED, "cudaErrorHostMemoryAlreadyRegistered",
     "part or all of the requested memory range is already mapped"},
    {CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED, "cudaErrorHostMemoryNotRegistered",
     "pointer does not correspond to a registered memory region"},
    // What the simulator cannot do (CUDA graphs, interprocess handles) fails with this: PyTorch's error
    // ("CUDA error: ...") quotes the description, which therefore names the simulated device.
    {CUDA_ERROR_NOT_SUPPORTED, "cudaErrorNotSupported",
     "operation not supported on the gpuleak simulated CUDA device"},
};

// What the real runtime answers for a code it does not know.
constexpr const char* kUnrecognized = "unrecognized error code";

} // namespace

extern "C" {

const char* cudaGetErrorString(cudaError_t error) {
    const ErrorText* text = gpuleak::sim::find_error(kErrors, error);
    return text != nullptr ? text->description : kUnrecognized;
}

const char* cudaGetErrorName(cudaError_t error) {
    const ErrorText* text = gpuleak::sim::find_error(kErrors, error);
    return text != nullptr ? text->name : kUnrecognized;
}

} // extern "C"
