// Every function the simulated libcuda.so.1 exports. The rows of cuda_entry_points.def are declared from
// the table itself, so a definition whose signature drifts from the table fails to compile.
#pragma once

#include "gpuleak/cuda_abi.h"
#include "sim_export.h"

#include <cstdint>

extern "C" {

// Handles of the JIT path (driver_modules.cpp); enumerations in the signatures below are ints.
using CUmodule = struct CUmod_st*;
using CUfunction = struct CUfunc_st*;
using CUlinkState = struct CUlinkState_st*;
// The runtime's cudaEvent_t too (runtime_abi.h).
using CUevent = struct CUevent_st*;
using CUhostFn = void (*)(void* userData);
using CUstreamCallback = void (*)(CUstream hStream, CUresult status, void* userData);
// What pointer queries ask for and answer (CUpointer_attribute, CUmemorytype), as in cuda.h: the driver's
// answers (driver_pointers.cpp), the runtime's cudaPointerGetAttributes and the tests read the same names.
constexpr int CU_POINTER_ATTRIBUTE_CONTEXT = 1;
constexpr int CU_POINTER_ATTRIBUTE_MEMORY_TYPE = 2;
constexpr int CU_POINTER_ATTRIBUTE_DEVICE_POINTER = 3;
constexpr int CU_POINTER_ATTRIBUTE_HOST_POINTER = 4;
constexpr int CU_POINTER_ATTRIBUTE_P2P_TOKENS = 5;
constexpr int CU_POINTER_ATTRIBUTE_SYNC_MEMOPS = 6;
constexpr int CU_POINTER_ATTRIBUTE_BUFFER_ID = 7;
constexpr int CU_POINTER_ATTRIBUTE_IS_MANAGED = 8;
constexpr int CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL = 9;
constexpr int CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE = 10;
constexpr int CU_POINTER_ATTRIBUTE_RANGE_START_ADDR = 11;
constexpr int CU_POINTER_ATTRIBUTE_RANGE_SIZE = 12;
constexpr int CU_POINTER_ATTRIBUTE_MAPPED = 13;
constexpr int CU_POINTER_ATTRIBUTE_ALLOWED_HANDLE_TYPES = 14;
constexpr int CU_POINTER_ATTRIBUTE_IS_GPU_DIRECT_RDMA_CAPABLE = 15;
constexpr int CU_POINTER_ATTRIBUTE_ACCESS_FLAGS = 16;
constexpr int CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE = 17;
constexpr int CU_POINTER_ATTRIBUTE_MAPPING_SIZE = 18;
constexpr int CU_POINTER_ATTRIBUTE_MAPPING_BASE_ADDR = 19;
constexpr int CU_POINTER_ATTRIBUTE_MEMORY_BLOCK_ID = 20;
constexpr int CU_POINTER_ATTRIBUTE_IS_HW_DECOMPRESS_CAPABLE = 21;
constexpr unsigned int CU_MEMORYTYPE_HOST = 1;
constexpr unsigned int CU_MEMORYTYPE_DEVICE = 2;
constexpr unsigned int CU_POINTER_ATTRIBUTE_ACCESS_FLAG_READWRITE = 3;
// cuLaunchKernelEx's launch, laid out as in cuda.h; no launch attribute changes what the simulator does.
struct CUlaunchConfig {
    unsigned int gridDimX;
    unsigned int gridDimY;
    unsigned int gridDimZ;
    unsigned int blockDimX;
    unsigned int blockDimY;
    unsigned int blockDimZ;
    unsigned int sharedMemBytes;
    CUstream hStream;
    const void* attrs;
    unsigned int numAttrs;
};

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
GPULEAK_SIM_EXPORT CUresult cuDeviceGetAttribute(int* pi, int attrib, CUdevice dev);
GPULEAK_SIM_EXPORT CUresult cuDeviceGetUuid(CUuuid* uuid, CUdevice dev);
GPULEAK_SIM_EXPORT CUresult cuDeviceGetUuid_v2(CUuuid* uuid, CUdevice dev);
GPULEAK_SIM_EXPORT CUresult cuDeviceGetPCIBusId(char* pciBusId, int len, CUdevice dev);

GPULEAK_SIM_EXPORT CUresult cuDevicePrimaryCtxRelease_v2(CUdevice dev);
GPULEAK_SIM_EXPORT CUresult cuDevicePrimaryCtxGetState(CUdevice dev, unsigned int* flags, int* active);
GPULEAK_SIM_EXPORT CUresult cuCtxSetCurrent(CUcontext ctx);
GPULEAK_SIM_EXPORT CUresult cuCtxGetCurrent(CUcontext* pctx);
GPULEAK_SIM_EXPORT CUresult cuCtxGetDevice(CUdevice* device);
GPULEAK_SIM_EXPORT CUresult cuThreadExchangeStreamCaptureMode(CUstreamCaptureMode* mode);
GPULEAK_SIM_EXPORT CUresult cuCtxGetDevice_v2(CUdevice* device, CUcontext ctx);
GPULEAK_SIM_EXPORT CUresult cuCtxSynchronize(void);
GPULEAK_SIM_EXPORT CUresult cuCtxSynchronize_v2(CUcontext ctx);

GPULEAK_SIM_EXPORT CUresult cuStreamCreate(CUstream* phStream, unsigned int Flags);
GPULEAK_SIM_EXPORT CUresult cuStreamCreateWithPriority(CUstream* phStream, unsigned int flags, int priority);
GPULEAK_SIM_EXPORT CUresult cuStreamGetPriority(CUstream hStream, int* priority);
GPULEAK_SIM_EXPORT CUresult cuStreamQuery(CUstream hStream);
GPULEAK_SIM_EXPORT CUresult cuStreamIsCapturing(CUstream hStream, int* captureStatus);
GPULEAK_SIM_EXPORT CUresult cuCtxGetStreamPriorityRange(int* leastPriority, int* greatestPriority);
GPULEAK_SIM_EXPORT CUresult cuStreamDestroy_v2(CUstream hStream);
GPULEAK_SIM_EXPORT CUresult cuStreamSynchronize(CUstream hStream);
GPULEAK_SIM_EXPORT CUresult cuStreamWaitEvent(CUstream hStream, CUevent hEvent, unsigned int Flags);
GPULEAK_SIM_EXPORT CUresult cuLaunchHostFunc(CUstream hStream, CUhostFn fn, void* userData);
GPULEAK_SIM_EXPORT CUresult cuStreamAddCallback(CUstream hStream, CUstreamCallback callback, void* userData,
                                                unsigned int flags);

GPULEAK_SIM_EXPORT CUresult cuEventCreate(CUevent* phEvent, unsigned int Flags);
GPULEAK_SIM_EXPORT CUresult cuEventDestroy_v2(CUevent hEvent);
GPULEAK_SIM_EXPORT CUresult cuEventRecord(CUevent hEvent, CUstream hStream);
GPULEAK_SIM_EXPORT CUresult cuEventRecordWithFlags(CUevent hEvent, CUstream hStream, unsigned int flags);
GPULEAK_SIM_EXPORT CUresult cuEventQuery(CUevent hEvent);
GPULEAK_SIM_EXPORT CUresult cuEventSynchronize(CUevent hEvent);
GPULEAK_SIM_EXPORT CUresult cuEventElapsedTime(float* pMilliseconds, CUevent hStart, CUevent hEnd);
GPULEAK_SIM_EXPORT CUresult cuEventElapsedTime_v2(float* pMilliseconds, CUevent hStart, CUevent hEnd);

GPULEAK_SIM_EXPORT CUresult cuMemGetInfo_v2(size_t* free, size_t* total);
GPULEAK_SIM_EXPORT CUresult cuMemSetAccess(CUdeviceptr ptr, size_t size, const CUmemAccessDesc* desc,
                                           size_t count);
GPULEAK_SIM_EXPORT CUresult cuMemGetAllocationGranularity(size_t* granularity,
                                                          const CUmemAllocationProp* prop, int option);
// The stream-ordered allocator's pools (CUmemPool_attribute is an int): TensorFlow's cuda_malloc_async
// allocator sets the default pool's release threshold and access through the driver.
GPULEAK_SIM_EXPORT CUresult cuMemPoolGetAttribute(CUmemoryPool pool, int attr, void* value);
GPULEAK_SIM_EXPORT CUresult cuMemPoolSetAttribute(CUmemoryPool pool, int attr, void* value);
GPULEAK_SIM_EXPORT CUresult cuMemPoolSetAccess(CUmemoryPool pool, const CUmemAccessDesc* map, size_t count);

GPULEAK_SIM_EXPORT CUresult cuModuleLoad(CUmodule* module, const char* fname);
GPULEAK_SIM_EXPORT CUresult cuModuleLoadData(CUmodule* module, const void* image);
GPULEAK_SIM_EXPORT CUresult cuModuleLoadDataEx(CUmodule* module, const void* image, unsigned int numOptions,
                                               int* options, void** optionValues);
GPULEAK_SIM_EXPORT CUresult cuModuleLoadFatBinary(CUmodule* module, const void* fatCubin);
GPULEAK_SIM_EXPORT CUresult cuModuleUnload(CUmodule hmod);
GPULEAK_SIM_EXPORT CUresult cuModuleGetFunction(CUfunction* hfunc, CUmodule hmod, const char* name);
GPULEAK_SIM_EXPORT CUresult cuLinkCreate_v2(unsigned int numOptions, int* options, void** optionValues,
                                            CUlinkState* stateOut);
GPULEAK_SIM_EXPORT CUresult cuLinkAddData_v2(CUlinkState state, int type, void* data, size_t size,
                                             const char* name, unsigned int numOptions, int* options,
                                             void** optionValues);
GPULEAK_SIM_EXPORT CUresult cuLinkComplete(CUlinkState state, void** cubinOut, size_t* sizeOut);
GPULEAK_SIM_EXPORT CUresult cuLinkDestroy(CUlinkState state);
GPULEAK_SIM_EXPORT CUresult cuFuncGetAttribute(int* pi, int attrib, CUfunction hfunc);
GPULEAK_SIM_EXPORT CUresult cuFuncSetAttribute(CUfunction hfunc, int attrib, int value);
GPULEAK_SIM_EXPORT CUresult cuFuncSetCacheConfig(CUfunction hfunc, int config);
GPULEAK_SIM_EXPORT CUresult cuLaunchKernel(CUfunction f, unsigned int gridDimX, unsigned int gridDimY,
                                           unsigned int gridDimZ, unsigned int blockDimX,
                                           unsigned int blockDimY, unsigned int blockDimZ,
                                           unsigned int sharedMemBytes, CUstream hStream, void** kernelParams,
                                           void** extra);
GPULEAK_SIM_EXPORT CUresult cuLaunchKernelEx(const CUlaunchConfig* config, CUfunction f, void** kernelParams,
                                             void** extra);
GPULEAK_SIM_EXPORT CUresult cuLaunchCooperativeKernel(CUfunction f, unsigned int gridDimX,
                                                      unsigned int gridDimY, unsigned int gridDimZ,
                                                      unsigned int blockDimX, unsigned int blockDimY,
                                                      unsigned int blockDimZ, unsigned int sharedMemBytes,
                                                      CUstream hStream, void** kernelParams);
GPULEAK_SIM_EXPORT CUresult cuOccupancyMaxActiveBlocksPerMultiprocessor(int* numBlocks, CUfunction func,
                                                                        int blockSize,
                                                                        size_t dynamicSMemSize);
GPULEAK_SIM_EXPORT CUresult cuTensorMapEncodeTiled(
    void* tensorMap, int tensorDataType, std::uint32_t tensorRank, void* globalAddress,
    const std::uint64_t* globalDim, const std::uint64_t* globalStrides, const std::uint32_t* boxDim,
    const std::uint32_t* elementStrides, int interleave, int swizzle, int l2Promotion, int oobFill);
GPULEAK_SIM_EXPORT CUresult cuPointerGetAttribute(void* data, int attribute, CUdeviceptr ptr);
GPULEAK_SIM_EXPORT CUresult cuPointerGetAttributes(unsigned int numAttributes, int* attributes, void** data,
                                                   CUdeviceptr ptr);

GPULEAK_SIM_EXPORT CUresult cuMemExportToShareableHandle(void* shareableHandle,
                                                         CUmemGenericAllocationHandle handle, int handleType,
                                                         unsigned long long flags);
GPULEAK_SIM_EXPORT CUresult cuMemImportFromShareableHandle(CUmemGenericAllocationHandle* handle,
                                                           void* osHandle, int shHandleType);
GPULEAK_SIM_EXPORT CUresult cuMemRetainAllocationHandle(CUmemGenericAllocationHandle* handle, void* addr);
GPULEAK_SIM_EXPORT CUresult cuMemGetAllocationPropertiesFromHandle(CUmemAllocationProp* prop,
                                                                   CUmemGenericAllocationHandle handle);
GPULEAK_SIM_EXPORT CUresult cuMemsetD8_v2(CUdeviceptr dstDevice, unsigned char uc, size_t N);
GPULEAK_SIM_EXPORT CUresult cuMemsetD16_v2(CUdeviceptr dstDevice, unsigned short us, size_t N);
GPULEAK_SIM_EXPORT CUresult cuMemsetD32_v2(CUdeviceptr dstDevice, unsigned int ui, size_t N);
GPULEAK_SIM_EXPORT CUresult cuMemsetD8Async(CUdeviceptr dstDevice, unsigned char uc, size_t N,
                                            CUstream hStream);
GPULEAK_SIM_EXPORT CUresult cuMemsetD16Async(CUdeviceptr dstDevice, unsigned short us, size_t N,
                                             CUstream hStream);
GPULEAK_SIM_EXPORT CUresult cuMemsetD32Async(CUdeviceptr dstDevice, unsigned int ui, size_t N,
                                             CUstream hStream);

GPULEAK_SIM_EXPORT CUresult cuMemcpy(CUdeviceptr dst, CUdeviceptr src, size_t ByteCount);
GPULEAK_SIM_EXPORT CUresult cuMemcpyAsync(CUdeviceptr dst, CUdeviceptr src, size_t ByteCount,
                                          CUstream hStream);
GPULEAK_SIM_EXPORT CUresult cuMemcpyHtoD_v2(CUdeviceptr dstDevice, const void* srcHost, size_t ByteCount);
GPULEAK_SIM_EXPORT CUresult cuMemcpyDtoH_v2(void* dstHost, CUdeviceptr srcDevice, size_t ByteCount);
GPULEAK_SIM_EXPORT CUresult cuMemcpyDtoD_v2(CUdeviceptr dstDevice, CUdeviceptr srcDevice, size_t ByteCount);
GPULEAK_SIM_EXPORT CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr dstDevice, const void* srcHost, size_t ByteCount,
                                                 CUstream hStream);
GPULEAK_SIM_EXPORT CUresult cuMemcpyDtoHAsync_v2(void* dstHost, CUdeviceptr srcDevice, size_t ByteCount,
                                                 CUstream hStream);
GPULEAK_SIM_EXPORT CUresult cuMemcpyDtoDAsync_v2(CUdeviceptr dstDevice, CUdeviceptr srcDevice,
                                                 size_t ByteCount, CUstream hStream);
GPULEAK_SIM_EXPORT CUresult cuMemcpyPeer(CUdeviceptr dstDevice, CUcontext dstContext, CUdeviceptr srcDevice,
                                         CUcontext srcContext, size_t ByteCount);
GPULEAK_SIM_EXPORT CUresult cuMemcpyPeerAsync(CUdeviceptr dstDevice, CUcontext dstContext,
                                              CUdeviceptr srcDevice, CUcontext srcContext, size_t ByteCount,
                                              CUstream hStream);
GPULEAK_SIM_EXPORT CUresult cuStreamWriteValue32(CUstream stream, CUdeviceptr addr, std::uint32_t value,
                                                 unsigned int flags);

GPULEAK_SIM_EXPORT CUresult cuGetErrorString(CUresult error, const char** pStr);
GPULEAK_SIM_EXPORT CUresult cuGetErrorName(CUresult error, const char** pStr);
GPULEAK_SIM_EXPORT CUresult cuGetExportTable(const void** ppExportTable, const CUuuid* pExportTableId);

} // extern "C"
