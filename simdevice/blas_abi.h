// The C ABI of cuBLAS and cuBLASLt that blas_entry_points.def's prototypes are written in: handles,
// descriptors, complex numbers and the heuristic's result. Enumerations are ints in the C ABI.
// Layouts match cublas_api.h and cublasLt.h of the CUDA 13.0 toolkit; blas_abi_check.cpp compares
// them where those headers are installed.
#pragma once

#include "gpuleak/cuda_abi.h"

#include <cstddef>
#include <cstdint>

extern "C" {

using cublasStatus_t = int;
using cublasOperation_t = int;
using cublasFillMode_t = int;
using cublasDiagType_t = int;
using cublasSideMode_t = int;
using cublasPointerMode_t = int;
using cublasMath_t = int;
using cublasComputeType_t = int;
using cublasGemmAlgo_t = int;
using cudaDataType = int;
using cudaDataType_t = int;
using libraryPropertyType = int;
using cublasLtMatmulDescAttributes_t = int;
using cublasLtMatrixLayoutAttribute_t = int;
using cublasLtMatmulPreferenceAttributes_t = int;

constexpr cublasStatus_t CUBLAS_STATUS_SUCCESS = 0;
constexpr cublasStatus_t CUBLAS_STATUS_NOT_INITIALIZED = 1;
constexpr cublasStatus_t CUBLAS_STATUS_ALLOC_FAILED = 3;
constexpr cublasStatus_t CUBLAS_STATUS_INVALID_VALUE = 7;
constexpr cublasStatus_t CUBLAS_STATUS_ARCH_MISMATCH = 8;
constexpr cublasStatus_t CUBLAS_STATUS_MAPPING_ERROR = 11;
constexpr cublasStatus_t CUBLAS_STATUS_EXECUTION_FAILED = 13;
constexpr cublasStatus_t CUBLAS_STATUS_INTERNAL_ERROR = 14;
constexpr cublasStatus_t CUBLAS_STATUS_NOT_SUPPORTED = 15;
constexpr cublasStatus_t CUBLAS_STATUS_LICENSE_ERROR = 16;

constexpr cublasOperation_t CUBLAS_OP_N = 0;
constexpr cublasOperation_t CUBLAS_OP_C = 2;
constexpr cublasPointerMode_t CUBLAS_POINTER_MODE_DEVICE = 1;
// The math modes beyond the first few that cublasSetMathMode takes, and the flag that may be or-ed into
// any of them.
constexpr cublasMath_t CUBLAS_FP32_EMULATED_BF16X9_MATH = 4;
constexpr cublasMath_t CUBLAS_FP64_EMULATED_FIXEDPOINT_MATH = 8;
constexpr cublasMath_t CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION = 16;

constexpr libraryPropertyType MAJOR_VERSION = 0;
constexpr libraryPropertyType MINOR_VERSION = 1;
constexpr libraryPropertyType PATCH_LEVEL = 2;

#define GPULEAK_LT_ATTRIBUTE(descriptor, name, value, type, initial) constexpr int name = (value);
#include "blaslt_attributes.def"
constexpr int32_t CUBLASLT_ORDER_COL = 0;
constexpr int32_t CUBLASLT_POINTER_MODE_HOST = 0;
constexpr uint32_t CUBLASLT_EPILOGUE_DEFAULT = 1;
constexpr cublasFillMode_t CUBLAS_FILL_MODE_FULL = 2;
constexpr uint32_t CUBLASLT_SEARCH_BEST_FIT = 0;
constexpr uint32_t CUBLASLT_REDUCTION_SCHEME_MASK = 7;

// Handles: defined by blas_context.h, opaque to programs.
using cublasHandle_t = struct cublasContext*;
using cublasLtHandle_t = struct cublasLtContext*;
// Descriptors: the headers give them a size (programs may place them themselves with the *_internal
// initialisers, which PyTorch does not call); the stand-ins hand out their own objects behind them.
using cublasLtMatmulDesc_t = struct cublasLtMatmulDescOpaque_t*;
using cublasLtMatrixLayout_t = struct cublasLtMatrixLayoutOpaque_t*;
using cublasLtMatmulPreference_t = struct cublasLtMatmulPreferenceOpaque_t*;

struct alignas(8) cuComplex {
    float x, y;
};

struct alignas(16) cuDoubleComplex {
    double x, y;
};

struct cublasLtMatmulAlgo_t {
    uint64_t data[8];
};

struct cublasLtMatmulHeuristicResult_t {
    cublasLtMatmulAlgo_t algo;
    size_t workspaceSize;
    cublasStatus_t state;
    float wavesCount;
    int reserved[4];
};

} // extern "C"
