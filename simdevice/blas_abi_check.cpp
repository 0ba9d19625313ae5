// Compile-time check that blas_abi.h lays out cuBLAS's types as the installed toolkit's headers do, and
// that every row of blas_entry_points.def has the prototype those headers declare (a toolkit whose
// headers changed fails here until the table is generated again). Built only where the headers are
// found; it has no code to run.
#include "blas_abi.h"

#include <cstddef>

// What the toolkit's headers include, so that namespace real below holds only their own declarations.
#include <climits>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <new>
#include <utility>

namespace real {
#include <cublasLt.h>
#include <cublas_api.h>

// A cast to the row's prototype compiles only if the header declares exactly that one (some names are
// overloaded with C++ wrappers there).
#define GPULEAK_SAME_PROTOTYPE(ret, name, params)                                                            \
    using name##_prototype = decltype(static_cast<ret(*) params>(&name));
#define GPULEAK_BLAS_OWN(lib, ret, name, params) GPULEAK_SAME_PROTOTYPE(ret, name, params)
#define GPULEAK_BLAS_GEMM(lib, name, params, ...) GPULEAK_SAME_PROTOTYPE(cublasStatus_t, name, params)
#define GPULEAK_BLAS_COMPUTE(lib, name, params, ...) GPULEAK_SAME_PROTOTYPE(cublasStatus_t, name, params)
#define GPULEAK_BLAS_REFUSED(lib, name, params) GPULEAK_SAME_PROTOTYPE(cublasStatus_t, name, params)
#include "blas_entry_points.def"
#undef GPULEAK_SAME_PROTOTYPE

static_assert(CUBLAS_VER_MAJOR == GPULEAK_CUBLAS_VER_MAJOR && CUBLAS_VER_MINOR == GPULEAK_CUBLAS_VER_MINOR &&
                  CUBLAS_VER_PATCH == GPULEAK_CUBLAS_VER_PATCH,
              "blas_entry_points.def was generated from another cuBLAS");
} // namespace real

#define GPULEAK_SAME_SIZE(type) static_assert(sizeof(::type) == sizeof(real::type), #type)
#define GPULEAK_SAME_OFFSET(type, field)                                                                     \
    static_assert(offsetof(::type, field) == offsetof(real::type, field), #type "." #field)
#define GPULEAK_SAME_VALUE(name) static_assert(::name == real::name, #name)

GPULEAK_SAME_SIZE(cuComplex);
GPULEAK_SAME_SIZE(cuDoubleComplex);
static_assert(alignof(::cuComplex) == alignof(real::cuComplex));
static_assert(alignof(::cuDoubleComplex) == alignof(real::cuDoubleComplex));
GPULEAK_SAME_SIZE(cublasLtMatmulAlgo_t);
GPULEAK_SAME_SIZE(cublasLtMatmulHeuristicResult_t);
GPULEAK_SAME_OFFSET(cublasLtMatmulHeuristicResult_t, workspaceSize);
GPULEAK_SAME_OFFSET(cublasLtMatmulHeuristicResult_t, state);
GPULEAK_SAME_OFFSET(cublasLtMatmulHeuristicResult_t, wavesCount);
// Enumerations are passed as ints.
GPULEAK_SAME_SIZE(cublasStatus_t);
GPULEAK_SAME_SIZE(cublasOperation_t);
GPULEAK_SAME_SIZE(cublasComputeType_t);
GPULEAK_SAME_SIZE(cudaDataType);
GPULEAK_SAME_SIZE(cublasLtMatmulDescAttributes_t);

GPULEAK_SAME_VALUE(CUBLAS_STATUS_SUCCESS);
GPULEAK_SAME_VALUE(CUBLAS_STATUS_NOT_INITIALIZED);
GPULEAK_SAME_VALUE(CUBLAS_STATUS_ALLOC_FAILED);
GPULEAK_SAME_VALUE(CUBLAS_STATUS_INVALID_VALUE);
GPULEAK_SAME_VALUE(CUBLAS_STATUS_ARCH_MISMATCH);
GPULEAK_SAME_VALUE(CUBLAS_STATUS_MAPPING_ERROR);
GPULEAK_SAME_VALUE(CUBLAS_STATUS_EXECUTION_FAILED);
GPULEAK_SAME_VALUE(CUBLAS_STATUS_INTERNAL_ERROR);
GPULEAK_SAME_VALUE(CUBLAS_STATUS_NOT_SUPPORTED);
GPULEAK_SAME_VALUE(CUBLAS_STATUS_LICENSE_ERROR);
GPULEAK_SAME_VALUE(CUBLAS_OP_N);
GPULEAK_SAME_VALUE(CUBLAS_OP_C);
GPULEAK_SAME_VALUE(CUBLAS_POINTER_MODE_DEVICE);
GPULEAK_SAME_VALUE(CUBLAS_FP32_EMULATED_BF16X9_MATH);
GPULEAK_SAME_VALUE(CUBLAS_FP64_EMULATED_FIXEDPOINT_MATH);
GPULEAK_SAME_VALUE(CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION);
GPULEAK_SAME_VALUE(MAJOR_VERSION);
GPULEAK_SAME_VALUE(MINOR_VERSION);
GPULEAK_SAME_VALUE(PATCH_LEVEL);
#define GPULEAK_LT_ATTRIBUTE(descriptor, name, ...) GPULEAK_SAME_VALUE(name);
#include "blaslt_attributes.def"
GPULEAK_SAME_VALUE(CUBLASLT_ORDER_COL);
GPULEAK_SAME_VALUE(CUBLASLT_POINTER_MODE_HOST);
GPULEAK_SAME_VALUE(CUBLASLT_EPILOGUE_DEFAULT);
GPULEAK_SAME_VALUE(CUBLAS_FILL_MODE_FULL);
GPULEAK_SAME_VALUE(CUBLASLT_SEARCH_BEST_FIT);
GPULEAK_SAME_VALUE(CUBLASLT_REDUCTION_SCHEME_MASK);
