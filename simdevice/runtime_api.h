// Every function the simulated libcudart.so.13 (and .12) exports. The rows of cuda_entry_points.def are
// declared from the table itself, so a definition whose signature drifts from the table fails to compile.
#pragma once

#include "runtime_abi.h"
#include "runtime_abi12.h"
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

// runtime_properties.cpp
GPULEAK_SIM_EXPORT cudaError_t cudaGetDeviceProperties(cudaDeviceProp* prop, int device);
// Defined in the libcudart.so.12 build only.
GPULEAK_SIM_EXPORT cudaError_t cudaGetDeviceProperties_v2(cuda12::cudaDeviceProp* prop, int device);
GPULEAK_SIM_EXPORT cudaError_t cudaDeviceGetAttribute(int* value, cudaDeviceAttr attr, int device);
GPULEAK_SIM_EXPORT cudaError_t cudaDeviceGetPCIBusId(char* pciBusId, int len, int device);
GPULEAK_SIM_EXPORT cudaError_t cudaDeviceCanAccessPeer(int* canAccessPeer, int device, int peerDevice);
GPULEAK_SIM_EXPORT cudaError_t cudaDeviceEnablePeerAccess(int peerDevice, unsigned int flags);

// runtime_streams.cpp
GPULEAK_SIM_EXPORT cudaError_t cudaStreamCreate(cudaStream_t* pStream);
GPULEAK_SIM_EXPORT cudaError_t cudaStreamCreateWithFlags(cudaStream_t* pStream, unsigned int flags);
GPULEAK_SIM_EXPORT cudaError_t cudaStreamCreateWithPriority(cudaStream_t* pStream, unsigned int flags,
                                                            int priority);
GPULEAK_SIM_EXPORT cudaError_t cudaStreamDestroy(cudaStream_t stream);
GPULEAK_SIM_EXPORT cudaError_t cudaStreamSynchronize(cudaStream_t stream);
GPULEAK_SIM_EXPORT cudaError_t cudaStreamQuery(cudaStream_t stream);
GPULEAK_SIM_EXPORT cudaError_t cudaStreamGetPriority(cudaStream_t hStream, int* priority);
GPULEAK_SIM_EXPORT cudaError_t cudaDeviceGetStreamPriorityRange(int* leastPriority, int* greatestPriority);
GPULEAK_SIM_EXPORT cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event,
                                                   unsigned int flags);
GPULEAK_SIM_EXPORT cudaError_t cudaStreamAddCallback(cudaStream_t stream, cudaStreamCallback_t callback,
                                                     void* userData, unsigned int flags);
GPULEAK_SIM_EXPORT cudaError_t cudaLaunchHostFunc(cudaStream_t stream, cudaHostFn_t fn, void* userData);

// runtime_events.cpp
GPULEAK_SIM_EXPORT cudaError_t cudaEventCreate(cudaEvent_t* event);
GPULEAK_SIM_EXPORT cudaError_t cudaEventCreateWithFlags(cudaEvent_t* event, unsigned int flags);
GPULEAK_SIM_EXPORT cudaError_t cudaEventDestroy(cudaEvent_t event);
GPULEAK_SIM_EXPORT cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream);
GPULEAK_SIM_EXPORT cudaError_t cudaEventRecordWithFlags(cudaEvent_t event, cudaStream_t stream,
                                                        unsigned int flags);
GPULEAK_SIM_EXPORT cudaError_t cudaEventQuery(cudaEvent_t event);
GPULEAK_SIM_EXPORT cudaError_t cudaEventSynchronize(cudaEvent_t event);
GPULEAK_SIM_EXPORT cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t start, cudaEvent_t end);

// runtime_copy.cpp
GPULEAK_SIM_EXPORT cudaError_t cudaMemcpy(void* dst, const void* src, size_t count, cudaMemcpyKind kind);
GPULEAK_SIM_EXPORT cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t count, cudaMemcpyKind kind,
                                               cudaStream_t stream);
GPULEAK_SIM_EXPORT cudaError_t cudaMemcpy2DAsync(void* dst, size_t dpitch, const void* src, size_t spitch,
                                                 size_t width, size_t height, cudaMemcpyKind kind,
                                                 cudaStream_t stream);
GPULEAK_SIM_EXPORT cudaError_t cudaMemcpyPeerAsync(void* dst, int dstDevice, const void* src, int srcDevice,
                                                   size_t count, cudaStream_t stream);
GPULEAK_SIM_EXPORT cudaError_t cudaMemset(void* devPtr, int value, size_t count);
GPULEAK_SIM_EXPORT cudaError_t cudaMemsetAsync(void* devPtr, int value, size_t count, cudaStream_t stream);

// runtime_host_memory.cpp
GPULEAK_SIM_EXPORT cudaError_t cudaHostRegister(void* ptr, size_t size, unsigned int flags);
GPULEAK_SIM_EXPORT cudaError_t cudaHostUnregister(void* ptr);
GPULEAK_SIM_EXPORT cudaError_t cudaPointerGetAttributes(cudaPointerAttributes* attributes, const void* ptr);

// runtime_modules.cpp: what nvcc's generated code calls to register and launch kernels and variables.
GPULEAK_SIM_EXPORT void** __cudaRegisterFatBinary(void* fatCubin);
GPULEAK_SIM_EXPORT void __cudaRegisterFatBinaryEnd(void** fatCubinHandle);
GPULEAK_SIM_EXPORT void __cudaUnregisterFatBinary(void** fatCubinHandle);
GPULEAK_SIM_EXPORT void __cudaRegisterFunction(void** fatCubinHandle, const char* hostFun, char* deviceFun,
                                               const char* deviceName, int thread_limit, uint3* tid,
                                               uint3* bid, dim3* bDim, dim3* gDim, int* wSize);
GPULEAK_SIM_EXPORT void __cudaRegisterVar(void** fatCubinHandle, char* hostVar, char* deviceAddress,
                                          const char* deviceName, int ext, size_t size, int constant,
                                          int global);
GPULEAK_SIM_EXPORT char __cudaInitModule(void** fatCubinHandle);
GPULEAK_SIM_EXPORT cudaError_t __cudaGetKernel(cudaKernel_t* kernel, const void* hostFun);
GPULEAK_SIM_EXPORT cudaError_t cudaGetSymbolAddress(void** devPtr, const void* symbol);
GPULEAK_SIM_EXPORT cudaError_t cudaMemcpyToSymbol(const void* symbol, const void* src, size_t count,
                                                  size_t offset, cudaMemcpyKind kind);
GPULEAK_SIM_EXPORT cudaError_t cudaFuncGetAttributes(cudaFuncAttributes* attr, const void* func);
GPULEAK_SIM_EXPORT cudaError_t cudaGetFuncBySymbol(cudaFunction_t* functionPtr, const void* symbolPtr);
GPULEAK_SIM_EXPORT cudaError_t cudaFuncSetAttribute(const void* func, cudaFuncAttribute attr, int value);

// runtime_launch.cpp
GPULEAK_SIM_EXPORT unsigned __cudaPushCallConfiguration(dim3 gridDim, dim3 blockDim, size_t sharedMem,
                                                        cudaStream_t stream);
GPULEAK_SIM_EXPORT cudaError_t __cudaPopCallConfiguration(dim3* gridDim, dim3* blockDim, size_t* sharedMem,
                                                          void* stream);
GPULEAK_SIM_EXPORT cudaError_t __cudaLaunchKernel(cudaKernel_t kernel, dim3 gridDim, dim3 blockDim,
                                                  void** args, size_t sharedMem, cudaStream_t stream);
GPULEAK_SIM_EXPORT cudaError_t __cudaLaunchKernel_ptsz(cudaKernel_t kernel, dim3 gridDim, dim3 blockDim,
                                                       void** args, size_t sharedMem, cudaStream_t stream);
GPULEAK_SIM_EXPORT cudaError_t cudaLaunchKernel(const void* func, dim3 gridDim, dim3 blockDim, void** args,
                                                size_t sharedMem, cudaStream_t stream);
GPULEAK_SIM_EXPORT cudaError_t cudaLaunchKernelExC(const cudaLaunchConfig_t* config, const void* func,
                                                   void** args);
GPULEAK_SIM_EXPORT cudaError_t cudaLaunchCooperativeKernel(const void* func, dim3 gridDim, dim3 blockDim,
                                                           void** args, size_t sharedMem,
                                                           cudaStream_t stream);
GPULEAK_SIM_EXPORT cudaError_t cudaOccupancyMaxActiveBlocksPerMultiprocessor(int* numBlocks, const void* func,
                                                                             int blockSize,
                                                                             size_t dynamicSMemSize);
GPULEAK_SIM_EXPORT cudaError_t cudaOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(
    int* numBlocks, const void* func, int blockSize, size_t dynamicSMemSize, unsigned int flags);

// runtime_capture.cpp: stream capture and graphs, which the simulator does not record.
GPULEAK_SIM_EXPORT cudaError_t cudaStreamIsCapturing(cudaStream_t stream,
                                                     cudaStreamCaptureStatus* pCaptureStatus);
GPULEAK_SIM_EXPORT cudaError_t cudaStreamGetCaptureInfo(cudaStream_t stream,
                                                        cudaStreamCaptureStatus* captureStatus_out,
                                                        unsigned long long* id_out, cudaGraph_t* graph_out,
                                                        const cudaGraphNode_t** dependencies_out,
                                                        const cudaGraphEdgeData** edgeData_out,
                                                        size_t* numDependencies_out);
GPULEAK_SIM_EXPORT cudaError_t cudaThreadExchangeStreamCaptureMode(cudaStreamCaptureMode* mode);
GPULEAK_SIM_EXPORT cudaError_t cudaStreamBeginCapture(cudaStream_t stream, cudaStreamCaptureMode mode);
GPULEAK_SIM_EXPORT cudaError_t cudaStreamEndCapture(cudaStream_t stream, cudaGraph_t* pGraph);
GPULEAK_SIM_EXPORT cudaError_t cudaGraphInstantiateWithFlags(cudaGraphExec_t* pGraphExec, cudaGraph_t graph,
                                                             unsigned long long flags);
GPULEAK_SIM_EXPORT cudaError_t cudaGraphLaunch(cudaGraphExec_t graphExec, cudaStream_t stream);
GPULEAK_SIM_EXPORT cudaError_t cudaGraphDestroy(cudaGraph_t graph);
GPULEAK_SIM_EXPORT cudaError_t cudaGraphExecDestroy(cudaGraphExec_t graphExec);
GPULEAK_SIM_EXPORT cudaError_t cudaGraphGetNodes(cudaGraph_t graph, cudaGraphNode_t* nodes, size_t* numNodes);
GPULEAK_SIM_EXPORT cudaError_t cudaGraphNodeGetDependencies(cudaGraphNode_t node,
                                                            cudaGraphNode_t* pDependencies,
                                                            cudaGraphEdgeData* edgeData,
                                                            size_t* pNumDependencies);
GPULEAK_SIM_EXPORT cudaError_t cudaGraphDebugDotPrint(cudaGraph_t graph, const char* path,
                                                      unsigned int flags);

// runtime_unsupported.cpp: interprocess sharing, profiler control and the stream-ordered pool's knobs.
GPULEAK_SIM_EXPORT cudaError_t cudaIpcGetMemHandle(cudaIpcMemHandle_t* handle, void* devPtr);
GPULEAK_SIM_EXPORT cudaError_t cudaIpcOpenMemHandle(void** devPtr, cudaIpcMemHandle_t handle,
                                                    unsigned int flags);
GPULEAK_SIM_EXPORT cudaError_t cudaIpcCloseMemHandle(void* devPtr);
GPULEAK_SIM_EXPORT cudaError_t cudaIpcGetEventHandle(cudaIpcEventHandle_t* handle, cudaEvent_t event);
GPULEAK_SIM_EXPORT cudaError_t cudaIpcOpenEventHandle(cudaEvent_t* event, cudaIpcEventHandle_t handle);
GPULEAK_SIM_EXPORT cudaError_t cudaProfilerStart(void);
GPULEAK_SIM_EXPORT cudaError_t cudaProfilerStop(void);
GPULEAK_SIM_EXPORT cudaError_t cudaMemPoolGetAttribute(cudaMemPool_t memPool, cudaMemPoolAttr attr,
                                                       void* value);
GPULEAK_SIM_EXPORT cudaError_t cudaMemPoolSetAttribute(cudaMemPool_t memPool, cudaMemPoolAttr attr,
                                                       void* value);
GPULEAK_SIM_EXPORT cudaError_t cudaMemPoolSetAccess(cudaMemPool_t memPool, const cudaMemAccessDesc* descList,
                                                    size_t count);

GPULEAK_SIM_EXPORT cudaError_t cudaGetLastError(void);
GPULEAK_SIM_EXPORT cudaError_t cudaPeekAtLastError(void);
GPULEAK_SIM_EXPORT const char* cudaGetErrorString(cudaError_t error);
GPULEAK_SIM_EXPORT const char* cudaGetErrorName(cudaError_t error);

} // extern "C"
