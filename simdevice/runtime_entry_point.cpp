// cudaGetDriverEntryPoint and cudaGetDriverEntryPointByVersion: the driver's own cuGetProcAddress
// answers, as in the real runtime, so a lookup hands out exactly what the driver would.
#include "runtime_api.h"
#include "runtime_state.h"

using namespace gpuleak::sim;

namespace {

enum class DefaultStream { Legacy, PerThread };

// The _ptsz entry points are what code compiled for per-thread default streams calls, and there
// cudaEnableDefault means the per-thread variants.
bool to_driver_flags(unsigned long long flags, DefaultStream mode, cuuint64_t& out) {
    switch (flags) {
    case cudaEnableDefault:
        out = mode == DefaultStream::PerThread ? CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM
                                               : CU_GET_PROC_ADDRESS_DEFAULT;
        return true;
    case cudaEnableLegacyStream:
        out = CU_GET_PROC_ADDRESS_LEGACY_STREAM;
        return true;
    case cudaEnablePerThreadDefaultStream:
        out = CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM;
        return true;
    default:
        return false;
    }
}

cudaDriverEntryPointQueryResult to_runtime_status(CUdriverProcAddressQueryResult status) {
    switch (status) {
    case CU_GET_PROC_ADDRESS_SUCCESS:
        return cudaDriverEntryPointSuccess;
    case CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT:
        return cudaDriverEntryPointVersionNotSufficent;
    default:
        return cudaDriverEntryPointSymbolNotFound;
    }
}

// As documented for the real runtime: a symbol that is unknown or too new for `version` is not an error;
// the call succeeds with *funcPtr NULL and the reason in *driverStatus.
cudaError_t entry_point(const char* symbol, void** funcPtr, unsigned int version, unsigned long long flags,
                        cudaDriverEntryPointQueryResult* driverStatus, DefaultStream mode) {
    const DriverFunctions* cu = driver_functions();
    if (cu == nullptr) {
        return record_error(cudaErrorInsufficientDriver);
    }
    cuuint64_t driver_flags = 0;
    int driver_version = 0;
    if (symbol == nullptr || funcPtr == nullptr || !to_driver_flags(flags, mode, driver_flags) ||
        cu->driver_get_version(&driver_version) != CUDA_SUCCESS ||
        version > static_cast<unsigned>(driver_version)) {
        return record_error(cudaErrorInvalidValue);
    }
    void* function = nullptr;
    CUdriverProcAddressQueryResult status = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    const CUresult result =
        cu->get_proc_address(symbol, &function, static_cast<int>(version), driver_flags, &status);
    if (result != CUDA_SUCCESS && result != CUDA_ERROR_NOT_FOUND) {
        return record_error(from_driver(result));
    }
    *funcPtr = function;
    if (driverStatus != nullptr) {
        *driverStatus = to_runtime_status(status);
    }
    return cudaSuccess;
}

} // namespace

extern "C" {

cudaError_t cudaGetDriverEntryPoint(const char* symbol, void** funcPtr, unsigned long long flags,
                                    cudaDriverEntryPointQueryResult* driverStatus) {
    return entry_point(symbol, funcPtr, kCudaVersion, flags, driverStatus, DefaultStream::Legacy);
}

cudaError_t cudaGetDriverEntryPoint_ptsz(const char* symbol, void** funcPtr, unsigned long long flags,
                                         cudaDriverEntryPointQueryResult* driverStatus) {
    return entry_point(symbol, funcPtr, kCudaVersion, flags, driverStatus, DefaultStream::PerThread);
}

cudaError_t cudaGetDriverEntryPointByVersion(const char* symbol, void** funcPtr, unsigned int cudaVersion,
                                             unsigned long long flags,
                                             cudaDriverEntryPointQueryResult* driverStatus) {
    return entry_point(symbol, funcPtr, cudaVersion, flags, driverStatus, DefaultStream::Legacy);
}

cudaError_t cudaGetDriverEntryPointByVersion_ptsz(const char* symbol, void** funcPtr,
                                                  unsigned int cudaVersion, unsigned long long flags,
                                                  cudaDriverEntryPointQueryResult* driverStatus) {
    return entry_point(symbol, funcPtr, cudaVersion, flags, driverStatus, DefaultStream::PerThread);
}

} // extern "C"
