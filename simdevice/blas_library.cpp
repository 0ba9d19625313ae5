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
    return read_version_property(type, kCublasRelease, value) ? CUBLAS_STATUS_SUCCESS
                                                              : CUBLAS_STATUS_INVALID_VALUE;
}

} // namespace gpuleak::sim
