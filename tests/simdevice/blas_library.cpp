// What both simulated BLAS libraries answer alike: whether they can initialise, and their version.
#include "blas_library.h"

#include "driver_link.h"

namespace gpuleak::sim {

cublasStatus_t blas_library_status() {
    const DriverFunctions* cu = driver_functions();
    int devices = 0;
    if (cu == nullptr || cu->device_get_count(&devices) != CUDA_SUCCESS || devices == 0) {
        return CUBLAS_STATUS_NOT_INITIALIZED;
    }
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t blas_property(libraryPropertyType type, int* value) {
    if (value == nullptr) {
        return CUBLAS_STATUS_INVALID_VALUE;
    }
    switch (type) {
    case MAJOR_VERSION:
        *value = GPULEAK_CUBLAS_VER_MAJOR;
        return CUBLAS_STATUS_SUCCESS;
    case MINOR_VERSION:
        *value = GPULEAK_CUBLAS_VER_MINOR;
        return CUBLAS_STATUS_SUCCESS;
    case PATCH_LEVEL:
        *value = GPULEAK_CUBLAS_VER_PATCH;
        return CUBLAS_STATUS_SUCCESS;
    default:
        return CUBLAS_STATUS_INVALID_VALUE;
    }
}

} // namespace gpuleak::sim
