// Every function the simulated libcudart.so.13 exports. The rows of cuda_entry_points.def are declared
// from the table itself, so a definition whose signature drifts from the table fails to compile.
#pragma once

#include "cuda_abi.h"
#include "sim_export.h"

extern "C" {

#define GPULEAK_SIM_ROW_RUNTIME(sym, base, since, streams, params) GPULEAK_SIM_EXPORT cudaError_t sym params;
#define GPULEAK_SIM_ROW_DRIVER(sym, base, since, streams, params)
#include "entry_point_rows.inc"

GPULEAK_SIM_EXPORT cudaError_t cudaSetDevice(int device);
GPULEAK_SIM_EXPORT cudaError_t cudaGetDevice(int* device);
GPULEAK_SIM_EXPORT cudaError_t cudaGetDeviceCount(int* count);
GPULEAK_SIM_EXPORT cudaError_t cudaDeviceSynchronize(void);
GPULEAK_SIM_EXPORT cudaError_t cudaDeviceGetDefaultMemPool(cudaMemPool_t* memPool, int device);
GPULEAK_SIM_EXPORT cudaError_t cudaMemGetInfo(size_t* free, size_t* total);
GPULEAK_SIM_EXPORT cudaError_t cudaRuntimeGetVersion(int* runtimeVersion);
GPULEAK_SIM_EXPORT cudaError_t cudaDriverGetVersion(int* driverVersion);

GPULEAK_SIM_EXPORT cudaError_t cudaStreamCreate(cudaStream_t* pStream);
GPULEAK_SIM_EXPORT cudaError_t cudaStreamDestroy(cudaStream_t stream);
GPULEAK_SIM_EXPORT cudaError_t cudaStreamSynchronize(cudaStream_t stream);

GPULEAK_SIM_EXPORT cudaError_t cudaGetLastError(void);
GPULEAK_SIM_EXPORT cudaError_t cudaPeekAtLastError(void);
GPULEAK_SIM_EXPORT const char* cudaGetErrorString(cudaError_t error);
GPULEAK_SIM_EXPORT const char* cudaGetErrorName(cudaError_t error);

} // extern "C"
