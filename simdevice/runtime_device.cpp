// Runtime calls about devices, versions and the last error.
#include "runtime_api.h"
#include "runtime_state.h"

using namespace gpuleak::sim;

extern "C" {

cudaError_t cudaSetDevice(int device) {
    const DriverFunctions* cu = driver_functions();
    if (cu == nullptr) {
        return record_error(cudaErrorInsufficientDriver);
    }
    int count = 0;
    if (const CUresult result = cu->device_get_count(&count); result != CUDA_SUCCESS) {
        return record_error(from_driver(result));
    }
    if (device < 0 || device >= count) {
        return record_error(cudaErrorInvalidDevice);
    }
    return record_error(select_device(*cu, device));
}

cudaError_t cudaGetDevice(int* device) {
    if (device == nullptr) {
        return record_error(cudaErrorInvalidValue);
    }
    *device = selected_device();
    return cudaSuccess;
}

cudaError_t cudaGetDeviceCount(int* count) {
    const DriverFunctions* cu = driver_functions();
    if (cu == nullptr) {
        return record_error(cudaErrorInsufficientDriver);
    }
    if (count == nullptr) {
        return record_error(cudaErrorInvalidValue);
    }
    return record_error(from_driver(cu->device_get_count(count)));
}

cudaError_t cudaDeviceSynchronize(void) {
    return with_context(
        [](const DriverFunctions& cu) { return synchronize_current_context(cu.ctx_synchronize); });
}

cudaError_t cudaDeviceGetDefaultMemPool(cudaMemPool_t* memPool, int device) {
    return with_context(
        [&](const DriverFunctions& cu) { return cu.device_get_default_mem_pool(memPool, device); });
}

cudaError_t cudaMemGetInfo(size_t* free, size_t* total) {
    return with_context([&](const DriverFunctions& cu) { return cu.mem_get_info(free, total); });
}

cudaError_t cudaRuntimeGetVersion(int* runtimeVersion) {
    if (runtimeVersion == nullptr) {
        return record_error(cudaErrorInvalidValue);
    }
    *runtimeVersion = kCudaVersion;
    return cudaSuccess;
}

// Like the real runtime, a missing driver is reported as version 0 rather than as an error.
cudaError_t cudaDriverGetVersion(int* driverVersion) {
    if (driverVersion == nullptr) {
        return record_error(cudaErrorInvalidValue);
    }
    const DriverFunctions* cu = driver_functions();
    if (cu == nullptr) {
        *driverVersion = 0;
        return cudaSuccess;
    }
    return record_error(from_driver(cu->driver_get_version(driverVersion)));
}

cudaError_t cudaGetLastError(void) {
    return take_last_error();
}

cudaError_t cudaPeekAtLastError(void) {
    return peek_last_error();
}

} // extern "C"
