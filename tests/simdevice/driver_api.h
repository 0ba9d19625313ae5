// Every function the simulated libcuda.so.1 exports. The rows of cuda_entry_points.def are declared from
// the table itself, so a definition whose signature drifts from the table fails to compile.
#pragma once

#include "cuda_abi.h"
#include "sim_export.h"

extern "C" {

#define GPULEAK_SIM_ROW_DRIVER(sym, base, since, streams, params) GPULEAK_SIM_EXPORT CUresult sym params;
#define GPULEAK_SIM_ROW_RUNTIME(sym, base, since, streams, params)
#include "entry_point_rows.inc"

GPULEAK_SIM_EXPORT CUresult cuInit(unsigned int Flags);
GPULEAK_SIM_EXPORT CUresult cuDriverGetVersion(int* driverVersion);
GPULEAK_SIM_EXPORT CUresult cuDeviceGet(CUdevice* device, int ordinal);
GPULEAK_SIM_EXPORT CUresult cuDeviceGetCount(int* count);
GPULEAK_SIM_EXPORT CUresult cuDeviceGetName(char* name, int len, CUdevice dev);
GPULEAK_SIM_EXPORT CUresult cuDeviceTotalMem_v2(size_t* bytes, CUdevice dev);
GPULEAK_SIM_EXPORT CUresult cuDeviceGetDefaultMemPool(CUmemoryPool* pool_out, CUdevice dev);

GPULEAK_SIM_EXPORT CUresult cuDevicePrimaryCtxRetain(CUcontext* pctx, CUdevice dev);
GPULEAK_SIM_EXPORT CUresult cuDevicePrimaryCtxRelease_v2(CUdevice dev);
GPULEAK_SIM_EXPORT CUresult cuCtxSetCurrent(CUcontext ctx);
GPULEAK_SIM_EXPORT CUresult cuCtxGetCurrent(CUcontext* pctx);
GPULEAK_SIM_EXPORT CUresult cuCtxGetDevice(CUdevice* device);
GPULEAK_SIM_EXPORT CUresult cuCtxGetDevice_v2(CUdevice* device, CUcontext ctx);
GPULEAK_SIM_EXPORT CUresult cuCtxSynchronize(void);
GPULEAK_SIM_EXPORT CUresult cuCtxSynchronize_v2(CUcontext ctx);

GPULEAK_SIM_EXPORT CUresult cuStreamCreate(CUstream* phStream, unsigned int Flags);
GPULEAK_SIM_EXPORT CUresult cuStreamDestroy_v2(CUstream hStream);
GPULEAK_SIM_EXPORT CUresult cuStreamSynchronize(CUstream hStream);

GPULEAK_SIM_EXPORT CUresult cuMemGetInfo_v2(size_t* free, size_t* total);
GPULEAK_SIM_EXPORT CUresult cuMemSetAccess(CUdeviceptr ptr, size_t size, const CUmemAccessDesc* desc,
                                           size_t count);
GPULEAK_SIM_EXPORT CUresult cuMemGetAllocationGranularity(size_t* granularity,
                                                          const CUmemAllocationProp* prop, int option);

GPULEAK_SIM_EXPORT CUresult cuGetErrorString(CUresult error, const char** pStr);
GPULEAK_SIM_EXPORT CUresult cuGetErrorName(CUresult error, const char** pStr);
GPULEAK_SIM_EXPORT CUresult cuGetExportTable(const void** ppExportTable, const CUuuid* pExportTableId);

} // extern "C"
