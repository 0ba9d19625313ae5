// Every cuBLAS computation PyTorch calls, defined from blas_entry_points.def. Like the simulated
// kernels they compute nothing (device memory holds no meaningful numbers); they check their arguments
// as cuBLAS does, so that a program's mistakes fail as they would on a GPU. The batched solvers would
// have to report each problem's outcome (singular or not), which a computation that computes nothing
// cannot know: they are refused, saying why.
#include "blas_api.h"
#include "blas_context.h"
#include "stand_in_library.h"

#include <algorithm>
#include <cstdint>
#include <initializer_list>

// The rows define each function with its full parameter list; a computation that computes nothing
// reads only the few it checks.
#pragma GCC diagnostic ignored "-Wunused-parameter"

using namespace gpuleak::sim;

namespace {

RefusedLibrary batched_solvers("cuBLAS's batched solvers (getrf, getrs, geqrf, gels)",
                               "CUBLAS_STATUS_NOT_SUPPORTED");

bool any_negative(std::initializer_list<int64_t> sizes) {
    return std::any_of(sizes.begin(), sizes.end(), [](int64_t size) { return size < 0; });
}

cublasStatus_t computation_status(cublasHandle_t handle, std::initializer_list<int64_t> sizes) {
    if (!live_handle(handle)) {
        return CUBLAS_STATUS_NOT_INITIALIZED;
    }
    return any_negative(sizes) ? CUBLAS_STATUS_INVALID_VALUE : CUBLAS_STATUS_SUCCESS;
}

bool valid_operation(cublasOperation_t operation) {
    return operation >= CUBLAS_OP_N && operation <= CUBLAS_OP_C;
}

// C = op(A) op(B) in column-major order: op(A) is m x k, op(B) k x n, C m x n, and each leading
// dimension spans at least a column of its matrix as stored.
cublasStatus_t gemm_status(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb,
                           int64_t m, int64_t n, int64_t k, int64_t lda, int64_t ldb, int64_t ldc,
                           int64_t batch) {
    if (!live_handle(handle)) {
        return CUBLAS_STATUS_NOT_INITIALIZED;
    }
    if (!valid_operation(transa) || !valid_operation(transb) || any_negative({m, n, k, batch})) {
        return CUBLAS_STATUS_INVALID_VALUE;
    }
    const int64_t rows_a = transa == CUBLAS_OP_N ? m : k;
    const int64_t rows_b = transb == CUBLAS_OP_N ? k : n;
    if (lda < std::max<int64_t>(1, rows_a) || ldb < std::max<int64_t>(1, rows_b) ||
        ldc < std::max<int64_t>(1, m)) {
        return CUBLAS_STATUS_INVALID_VALUE;
    }
    return CUBLAS_STATUS_SUCCESS;
}

} // namespace

extern "C" {

#define GPULEAK_BLAS_GEMM(lib, name, params, handle, transa, transb, m, n, k, lda, ldb, ldc, batch)          \
    cublasStatus_t name params {                                                                             \
        return gemm_status(handle, transa, transb, m, n, k, lda, ldb, ldc, batch);                           \
    }
#define GPULEAK_BLAS_SIZES(...)                                                                              \
    { __VA_ARGS__ }
#define GPULEAK_BLAS_COMPUTE(lib, name, params, handle, sizes)                                               \
    cublasStatus_t name params {                                                                             \
        return computation_status(handle, GPULEAK_BLAS_SIZES sizes);                                         \
    }
#define GPULEAK_BLAS_REFUSED(lib, name, params)                                                              \
    GPULEAK_REFUSED_FUNCTION(batched_solvers, CUBLAS_STATUS_NOT_SUPPORTED, cublasStatus_t, name, params)
#include "blas_entry_points.def"
#undef GPULEAK_BLAS_SIZES

} // extern "C"
