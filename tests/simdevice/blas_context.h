// What a cuBLAS handle is in the simulated libraries. A cuBLASLt handle may be a cuBLAS handle cast to
// cublasLtHandle_t (cuBLAS documents the cast, and PyTorch makes it), so both kinds start with the same
// cublasLtContext, which each library recognises by its mark.
#pragma once

#include "blas_abi.h"

#include <cstdint>

extern "C" {

struct cublasLtContext {
    // Cleared when the handle is destroyed, so that a destroyed handle reads as not initialised.
    uint64_t mark;
};

struct cublasContext {
    cublasLtContext lt;
    cudaStream_t stream;
    void* workspace;
    size_t workspace_size;
    cublasMath_t math_mode;
    cublasPointerMode_t pointer_mode;
};

} // extern "C"

namespace gpuleak::sim {

inline constexpr uint64_t kBlasHandleMark = 0x73696d2d6375626cULL; // "sim-cubl"

inline bool live_handle(const cublasLtContext* handle) {
    return handle != nullptr && handle->mark == kBlasHandleMark;
}

inline bool live_handle(const cublasContext* handle) {
    return handle != nullptr && live_handle(&handle->lt);
}

} // namespace gpuleak::sim
