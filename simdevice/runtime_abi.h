// The slice of the CUDA runtime ABI, beyond include/gpuleak/cuda_abi.h, that PyTorch's libraries call: launch
// configuration, device properties, events, copies, stream capture and the registration calls nvcc's
// generated code makes. Layouts match driver_types.h and vector_types.h of CUDA 13.0;
// runtime_abi_check.cpp compares them with the toolkit's headers where those are installed.
#pragma once

#include "gpuleak/cuda_abi.h"

#include <cstddef>

extern "C" {

struct uint3 {
    unsigned int x, y, z;
};

struct dim3 {
    unsigned int x, y, z;
};

using cudaEvent_t = struct CUevent_st*;
using cudaKernel_t = struct CUkern_st*;
// The driver's CUfunction, as in the real runtime.
using cudaFunction_t = struct CUfunc_st*;
using cudaLibrary_t = struct CUlib_st*;
using cudaGraph_t = struct CUgraph_st*;
using cudaGraphExec_t = struct CUgraphExec_st*;
using cudaGraphNode_t = struct CUgraphNode_st*;
using cudaUserObject_t = struct CUuserObject_st*;
using cudaHostFn_t = void (*)(void* userData);
using cudaStreamCallback_t = void (*)(cudaStream_t stream, cudaError_t status, void* userData);

// Enumerations are ints in the C ABI.
using cudaMemcpyKind = int;
using cudaStreamCaptureStatus = int;
using cudaStreamCaptureMode = int;
using cudaFuncAttribute = int;
using cudaDeviceAttr = int;
using cudaMemPoolAttr = int;
using cudaMemoryType = int;
using cudaGraphMemAttributeType = int;

constexpr cudaError_t cudaErrorInvalidResourceHandle = 400;
constexpr cudaError_t cudaErrorNotReady = 600;
constexpr cudaError_t cudaErrorPeerAccessAlreadyEnabled = 704;
constexpr cudaError_t cudaErrorNotSupported = 801;
constexpr cudaError_t cudaErrorStreamCaptureUnsupported = 900;
constexpr cudaError_t cudaErrorInvalidDeviceFunction = 98;

constexpr cudaMemoryType cudaMemoryTypeUnregistered = 0;
constexpr cudaMemoryType cudaMemoryTypeHost = 1;
constexpr cudaMemoryType cudaMemoryTypeDevice = 2;
constexpr cudaMemoryType cudaMemoryTypeManaged = 3;
constexpr cudaStreamCaptureStatus cudaStreamCaptureStatusNone = 0;
constexpr unsigned int cudaEventDisableTiming = 0x02;

struct cudaUUID_t {
    char bytes[16];
};

struct cudaDeviceProp {
    char name[256];
    cudaUUID_t uuid;
    char luid[8];
    unsigned int luidDeviceNodeMask;
    std::size_t totalGlobalMem;
    std::size_t sharedMemPerBlock;
    int regsPerBlock;
    int warpSize;
    std::size_t memPitch;
    int maxThreadsPerBlock;
    int maxThreadsDim[3];
    int maxGridSize[3];
    std::size_t totalConstMem;
    int major;
    int minor;
    std::size_t textureAlignment;
    std::size_t texturePitchAlignment;
    int multiProcessorCount;
    int integrated;
    int canMapHostMemory;
    int maxTexture1D;
    int maxTexture1DMipmap;
    int maxTexture2D[2];
    int maxTexture2DMipmap[2];
    int maxTexture2DLinear[3];
    int maxTexture2DGather[2];
    int maxTexture3D[3];
    int maxTexture3DAlt[3];
    int maxTextureCubemap;
    int maxTexture1DLayered[2];
    int maxTexture2DLayered[3];
    int maxTextureCubemapLayered[2];
    int maxSurface1D;
    int maxSurface2D[2];
    int maxSurface3D[3];
    int maxSurface1DLayered[2];
    int maxSurface2DLayered[3];
    int maxSurfaceCubemap;
    int maxSurfaceCubemapLayered[2];
    std::size_t surfaceAlignment;
    int concurrentKernels;
    int ECCEnabled;
    int pciBusID;
    int pciDeviceID;
    int pciDomainID;
    int tccDriver;
    int asyncEngineCount;
    int unifiedAddressing;
    int memoryBusWidth;
    int l2CacheSize;
    int persistingL2CacheMaxSize;
    int maxThreadsPerMultiProcessor;
    int streamPrioritiesSupported;
    int globalL1CacheSupported;
    int localL1CacheSupported;
    std::size_t sharedMemPerMultiprocessor;
    int regsPerMultiprocessor;
    int managedMemory;
    int isMultiGpuBoard;
    int multiGpuBoardGroupID;
    int hostNativeAtomicSupported;
    int pageableMemoryAccess;
    int concurrentManagedAccess;
    int computePreemptionSupported;
    int canUseHostPointerForRegisteredMem;
    int cooperativeLaunch;
    std::size_t sharedMemPerBlockOptin;
    int pageableMemoryAccessUsesHostPageTables;
    int directManagedMemAccessFromHost;
    int maxBlocksPerMultiProcessor;
    int accessPolicyMaxWindowSize;
    std::size_t reservedSharedMemPerBlock;
    int hostRegisterSupported;
    int sparseCudaArraySupported;
    int hostRegisterReadOnlySupported;
    int timelineSemaphoreInteropSupported;
    int memoryPoolsSupported;
    int gpuDirectRDMASupported;
    unsigned int gpuDirectRDMAFlushWritesOptions;
    int gpuDirectRDMAWritesOrdering;
    unsigned int memoryPoolSupportedHandleTypes;
    int deferredMappingCudaArraySupported;
    int ipcEventSupported;
    int clusterLaunch;
    int unifiedFunctionPointers;
    int deviceNumaConfig;
    int deviceNumaId;
    int mpsEnabled;
    int hostNumaId;
    unsigned int gpuPciDeviceID;
    unsigned int gpuPciSubsystemID;
    int hostNumaMultinodeIpcSupported;
    int reserved[56];
};

struct cudaFuncAttributes {
    std::size_t sharedSizeBytes;
    std::size_t constSizeBytes;
    std::size_t localSizeBytes;
    int maxThreadsPerBlock;
    int numRegs;
    int ptxVersion;
    int binaryVersion;
    int cacheModeCA;
    int maxDynamicSharedSizeBytes;
    int preferredShmemCarveout;
    int clusterDimMustBeSet;
    int requiredClusterWidth;
    int requiredClusterHeight;
    int requiredClusterDepth;
    int clusterSchedulingPolicyPreference;
    int nonPortableClusterSizeAllowed;
    int reserved[16];
};

struct cudaPointerAttributes {
    cudaMemoryType type;
    int device;
    void* devicePointer;
    void* hostPointer;
    long reserved[8];
};

struct cudaLaunchAttribute;
struct cudaLaunchConfig_t {
    dim3 gridDim;
    dim3 blockDim;
    std::size_t dynamicSmemBytes;
    cudaStream_t stream;
    cudaLaunchAttribute* attrs;
    unsigned int numAttrs;
};

struct cudaIpcEventHandle_t {
    char reserved[64];
};

struct cudaIpcMemHandle_t {
    char reserved[64];
};

struct cudaMemAccessDesc;
struct cudaGraphEdgeData;

} // extern "C"
