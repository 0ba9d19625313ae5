// What a cuBLAS handle is in the simulated libraries. A cuBLASLt handle may be a cuBLAS handle cast to
// cublasLtHandle_t (cuBLAS documents the cast, and PyTorch makes it), so both kinds start with the same
// cublasLtContext, and its mark tells either library that what it was handed is a handle: a null one,
// or a pointer to something else, is not initialised. A destroyed handle is as undefined to use as with
// the real libraries.
#pragma once

#include "blas_abi.h"

#include <cstdint>

extern "C" {

struct cublasLtContext {
    uint64_t mark;
};

// What the handle's getters give back. Its workspace is only checked: the computations need none.
struct cublasContext {
    cublasLtContext lt;
    cudaStream_t stream;
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
