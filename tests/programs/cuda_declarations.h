// The CUDA functions the test programs call: every row of cuda_entry_points.def, declared from the table
// so that the signatures cannot drift from it, and the few other functions the programs need.
#pragma once

#include "gpuleak/cuda_entry_points.h"

extern "C" {
#define CUDA_DECLARATIONS_ROW_(lib, sym, params) gpuleak::ResultOf<gpuleak::Library::lib> sym params;
#define GPULEAK_ALLOC(lib, sym, base, since, streams, kind, params, ...)                                     \
    CUDA_DECLARATIONS_ROW_(lib, sym, params)
#define GPULEAK_FREE(lib, sym, base, since, streams, space, params, ...)                                     \
    CUDA_DECLARATIONS_ROW_(lib, sym, params)
#define GPULEAK_FREE_RANGE(lib, sym, base, since, streams, space, params, ...)                               \
    CUDA_DECLARATIONS_ROW_(lib, sym, params)
#define GPULEAK_TRIM(lib, sym, base, since, streams, params, ...) CUDA_DECLARATIONS_ROW_(lib, sym, params)
#define GPULEAK_LOOKUP(lib, sym, base, since, streams, params, args) CUDA_DECLARATIONS_ROW_(lib, sym, params)
#define GPULEAK_CONTEXT(lib, sym, base, since, streams, params, ...) CUDA_DECLARATIONS_ROW_(lib, sym, params)
#include "gpuleak/cuda_entry_points.def"
#undef CUDA_DECLARATIONS_ROW_

cudaError_t cudaSetDevice(int device);
cudaError_t cudaGetLastError(void);
cudaError_t cudaStreamCreate(cudaStream_t* stream);
cudaError_t cudaStreamDestroy(cudaStream_t stream);
cudaError_t cudaDeviceGetDefaultMemPool(cudaMemPool_t* pool, int device);
CUresult cuDeviceGetDefaultMemPool(CUmemoryPool* pool, CUdevice device);
CUresult cuDevicePrimaryCtxRelease_v2(CUdevice dev);
cudaError_t cudaThreadExchangeStreamCaptureMode(int* mode);
}
