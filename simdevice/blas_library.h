// What both simulated BLAS libraries answer alike. Each library links its own copy.
#pragma once

#include "blas_api.h"
#include "stand_in_library.h"

namespace gpuleak::sim {

// The cuBLAS release this build answers for: that of the toolkit whose headers blas_entry_points.def was
// generated from, or in the libcublas.so.12 build cuBLAS 12.8.3, CUDA 12.8's, as libcudart.so.12 is.
#if GPULEAK_SIM_CUDA_VERSION < 13000
inline constexpr Version kCublasRelease{12, 8, 3};
#else
inline constexpr Version kCublasRelease{GPULEAK_CUBLAS_VER_MAJOR, GPULEAK_CUBLAS_VER_MINOR,
                                        GPULEAK_CUBLAS_VER_PATCH};
#endif
// Its CUBLAS_VERSION, as cublasGetVersion and cublasLtGetVersion answer.
inline constexpr int kCublasVersion =
    kCublasRelease.major * 10000 + kCublasRelease.minor * 100 + kCublasRelease.patch;

// CUBLAS_STATUS_NOT_INITIALIZED unless the driver loads and has a device: cublasCreate and
// cublasLtCreate fail so when the CUDA runtime cannot initialise.
cublasStatus_t blas_library_status();

// cublasGetProperty and cublasLtGetProperty: the version's major, minor and patch numbers.
cublasStatus_t blas_property(libraryPropertyType type, int* value);

} // namespace gpuleak::sim
