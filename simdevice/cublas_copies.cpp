// Copies between host and device memory by cuBLAS's helpers. Device memory is host memory in this
// process, so they are plain copies, complete before they return as the runtime's are; the stream they
// are ordered on is therefore not used.
#include "blas_api.h"

#include <algorithm>
#include <cstring>

namespace {

cublasStatus_t copy_matrix(int rows, int cols, int elemSize, const void* A, int lda, void* B, int ldb) {
    if (rows < 0 || cols < 0 || elemSize <= 0 || lda < std::max(1, rows) || ldb < std::max(1, rows)) {
        return CUBLAS_STATUS_INVALID_VALUE;
    }
    const auto element = static_cast<size_t>(elemSize);
    for (size_t column = 0; column < static_cast<size_t>(cols); ++column) {
        std::memmove(static_cast<char*>(B) + column * static_cast<size_t>(ldb) * element,
                     static_cast<const char*>(A) + column * static_cast<size_t>(lda) * element,
                     static_cast<size_t>(rows) * element);
    }
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t copy_vector(int n, int elemSize, const void* x, int incx, void* y, int incy) {
    if (n < 0 || elemSize <= 0 || incx <= 0 || incy <= 0) {
        return CUBLAS_STATUS_INVALID_VALUE;
    }
    const auto element = static_cast<size_t>(elemSize);
    for (size_t i = 0; i < static_cast<size_t>(n); ++i) {
        std::memmove(static_cast<char*>(y) + i * static_cast<size_t>(incy) * element,
                     static_cast<const char*>(x) + i * static_cast<size_t>(incx) * element, element);
    }
    return CUBLAS_STATUS_SUCCESS;
}

} // namespace

extern "C" {

cublasStatus_t cublasSetMatrixAsync(int rows, int cols, int elemSize, const void* A, int lda, void* B,
                                    int ldb, cudaStream_t /*stream*/) {
    return copy_matrix(rows, cols, elemSize, A, lda, B, ldb);
}

cublasStatus_t cublasGetMatrixAsync(int rows, int cols, int elemSize, const void* A, int lda, void* B,
                                    int ldb, cudaStream_t /*stream*/) {
    return copy_matrix(rows, cols, elemSize, A, lda, B, ldb);
}

cublasStatus_t cublasSetVectorAsync(int n, int elemSize, const void* hostPtr, int incx, void* devicePtr,
                                    int incy, cudaStream_t /*stream*/) {
    return copy_vector(n, elemSize, hostPtr, incx, devicePtr, incy);
}

cublasStatus_t cublasGetVectorAsync(int n, int elemSize, const void* devicePtr, int incx, void* hostPtr,
                                    int incy, cudaStream_t /*stream*/) {
    return copy_vector(n, elemSize, devicePtr, incx, hostPtr, incy);
}

} // extern "C"
