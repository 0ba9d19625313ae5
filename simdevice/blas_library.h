// What both simulated BLAS libraries answer alike. Each library links its own copy.
#pragma once

#include "blas_api.h"

namespace gpuleak::sim {

// CUBLAS_VERSION of the toolkit whose headers blas_entry_points.def was generated from.
inline constexpr int kCublasVersion =
    GPULEAK_CUBLAS_VER_MAJOR * 10000 + GPULEAK_CUBLAS_VER_MINOR * 100 + GPULEAK_CUBLAS_VER_PATCH;

// CUBLAS_STATUS_NOT_INITIALIZED unless the driver loads and has a device: cublasCreate and
// cublasLtCreate fail so when the CUDA runtime cannot initialise.
cublasStatus_t blas_library_status();

// cublasGetProperty and cublasLtGetProperty: the version's major, minor and patch numbers.
cublasStatus_t blas_property(libraryPropertyType type, int* value);

} // namespace gpuleak::sim
