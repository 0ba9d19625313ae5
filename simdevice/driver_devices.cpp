// Driver initialisation and the questions a program asks about the devices.
#include "device_state.h"
#include "driver_api.h"

#include <cstdio>

using namespace gpuleak::sim;

namespace {

constexpr int kDriverVersion = 13000;

} // namespace

extern "C" {

CUresult cuInit(unsigned int Flags) {
    if (Flags != 0) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    initialize_devices();
    return CUDA_SUCCESS;
}

CUresult cuDriverGetVersion(int* driverVersion) {
    if (driverVersion == nullptr) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    *driverVersion = kDriverVersion;
    return CUDA_SUCCESS;
}

CUresult cuDeviceGet(CUdevice* device, int ordinal) {
    if (!devices_initialized()) {
        return CUDA_ERROR_NOT_INITIALIZED;
    }
    if (device == nullptr) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    if (!valid_device(ordinal)) {
        return CUDA_ERROR_INVALID_DEVICE;
    }
    *device = ordinal;
    return CUDA_SUCCESS;
}

CUresult cuDeviceGetCount(int* count) {
    if (!devices_initialized()) {
        return CUDA_ERROR_NOT_INITIALIZED;
    }
    if (count == nullptr) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    *count = device_count();
    return CUDA_SUCCESS;
}

CUresult cuDeviceGetName(char* name, int len, CUdevice dev) {
    if (!devices_initialized()) {
        return CUDA_ERROR_NOT_INITIALIZED;
    }
    if (name == nullptr || len <= 0) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    if (!valid_device(dev)) {
        return CUDA_ERROR_INVALID_DEVICE;
    }
    std::snprintf(name, static_cast<size_t>(len), "gpuleak simulated device (no GPU)");
    return CUDA_SUCCESS;
}

CUresult cuDeviceTotalMem_v2(size_t* bytes, CUdevice dev) {
    if (!devices_initialized()) {
        return CUDA_ERROR_NOT_INITIALIZED;
    }
    if (bytes == nullptr) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    if (!valid_device(dev)) {
        return CUDA_ERROR_INVALID_DEVICE;
    }
    *bytes = device_capacity(dev);
    return CUDA_SUCCESS;
}

CUresult cuDeviceGetDefaultMemPool(CUmemoryPool* pool_out, CUdevice dev) {
    if (!devices_initialized()) {
        return CUDA_ERROR_NOT_INITIALIZED;
    }
    if (pool_out == nullptr) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    if (!valid_device(dev)) {
        return CUDA_ERROR_INVALID_DEVICE;
    }
    *pool_out = default_pool(dev);
    return CUDA_SUCCESS;
}

std::size_t gpuleak_sim_device_charged(int device) {
    return devices_initialized() && valid_device(device) ? device_charged(device) : 0;
}

} // extern "C"
