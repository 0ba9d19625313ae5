// Names and descriptions of the driver's error codes, for those the simulated driver can return.
#include "driver_api.h"
#include "error_text.h"

namespace {

using gpuleak::sim::ErrorText;

constexpr ErrorText kErrors[] = {
    {CUDA_SUCCESS, "CUDA_SUCCESS", "no error"},
    {CUDA_ERROR_INVALID_VALUE, "CUDA_ERROR_INVALID_VALUE", "invalid argument"},
    {CUDA_ERROR_OUT_OF_MEMORY, "CUDA_ERROR_OUT_OF_MEMORY", "out of memory"},
    {CUDA_ERROR_NOT_INITIALIZED, "CUDA_ERROR_NOT_INITIALIZED", "initialization error"},
    {CUDA_ERROR_INVALID_DEVICE, "CUDA_ERROR_INVALID_DEVICE", "invalid device ordinal"},
    {CUDA_ERROR_INVALID_CONTEXT, "CUDA_ERROR_INVALID_CONTEXT", "invalid device context"},
    {CUDA_ERROR_INVALID_HANDLE, "CUDA_ERROR_INVALID_HANDLE", "invalid resource handle"},
    {CUDA_ERROR_NOT_FOUND, "CUDA_ERROR_NOT_FOUND", "named symbol not found"},
    {CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED, "CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED",
     "part or all of the requested memory range is already mapped"},
    {CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED, "CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED",
     "pointer does not correspond to a registered memory region"},
    {CUDA_ERROR_NOT_SUPPORTED, "CUDA_ERROR_NOT_SUPPORTED",
     "operation not supported on the gpuleak simulated CUDA device"},
};

} // namespace

extern "C" {

// Like the real driver: an unknown code gets NULL and CUDA_ERROR_INVALID_VALUE.
CUresult cuGetErrorString(CUresult error, const char** pStr) {
    if (pStr == nullptr) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    const ErrorText* text = gpuleak::sim::find_error(kErrors, error);
    *pStr = text != nullptr ? text->description : nullptr;
    return text != nullptr ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

CUresult cuGetErrorName(CUresult error, const char** pStr) {
    if (pStr == nullptr) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    const ErrorText* text = gpuleak::sim::find_error(kErrors, error);
    *pStr = text != nullptr ? text->name : nullptr;
    return text != nullptr ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

} // extern "C"
