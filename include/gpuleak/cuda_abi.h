// The slice of the CUDA runtime and driver ABI that gpuleak and the simulated device need. Declared here
// so that libgpuleak.so builds on machines without a CUDA toolkit; layouts match cuda.h and
// driver_types.h of CUDA 12/13 (checked against the 13.0 headers).
#pragma once

#include <cstddef>
#include <cstdint>

extern "C" {

using cudaError_t = int;
using CUresult = int;
using cudaStream_t = struct CUstream_st*;
using CUstream = struct CUstream_st*;
using cudaMemPool_t = struct CUmemPoolHandle_st*;
using CUmemoryPool = struct CUmemPoolHandle_st*;
using CUdeviceptr = unsigned long long;
using CUdevice = int;
using CUcontext = struct CUctx_st*;
using CUmemGenericAllocationHandle = unsigned long long;
using cuuint64_t = std::uint64_t;

constexpr cudaError_t cudaSuccess = 0;
constexpr cudaError_t cudaErrorInvalidValue = 1;
constexpr cudaError_t cudaErrorMemoryAllocation = 2;
constexpr cudaError_t cudaErrorNoDevice = 100;
constexpr cudaError_t cudaErrorInvalidDevice = 101;
constexpr cudaError_t cudaErrorSymbolNotFound = 500;
constexpr CUresult CUDA_SUCCESS = 0;
constexpr CUresult CUDA_ERROR_INVALID_VALUE = 1;
constexpr CUresult CUDA_ERROR_OUT_OF_MEMORY = 2;
constexpr CUresult CUDA_ERROR_NOT_INITIALIZED = 3;
constexpr CUresult CUDA_ERROR_NO_DEVICE = 100;
constexpr CUresult CUDA_ERROR_INVALID_DEVICE = 101;
constexpr CUresult CUDA_ERROR_INVALID_CONTEXT = 201;
constexpr CUresult CUDA_ERROR_NOT_FOUND = 500;
constexpr CUresult CUDA_ERROR_NOT_SUPPORTED = 801;

// cuGetProcAddress flags and query results.
constexpr cuuint64_t CU_GET_PROC_ADDRESS_DEFAULT = 0;
constexpr cuuint64_t CU_GET_PROC_ADDRESS_LEGACY_STREAM = 1;
constexpr cuuint64_t CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM = 2;
using CUdriverProcAddressQueryResult = int;
using cudaDriverEntryPointQueryResult = int;
constexpr int CU_GET_PROC_ADDRESS_SUCCESS = 0;
constexpr int CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND = 1;
constexpr int CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT = 2;

// A thread's stream capture interaction mode (cuThreadExchangeStreamCaptureMode).
using CUstreamCaptureMode = int;
constexpr CUstreamCaptureMode CU_STREAM_CAPTURE_MODE_GLOBAL = 0;
constexpr CUstreamCaptureMode CU_STREAM_CAPTURE_MODE_THREAD_LOCAL = 1;
constexpr CUstreamCaptureMode CU_STREAM_CAPTURE_MODE_RELAXED = 2;

struct cudaPitchedPtr {
    void* ptr;
    std::size_t pitch;
    std::size_t xsize;
    std::size_t ysize;
};

struct cudaExtent {
    std::size_t width;
    std::size_t height;
    std::size_t depth;
};

struct CUmemLocation {
    int type; // CUmemLocationType: 1 = device
    int id;
};

struct CUmemAllocationProp {
    int type;                 // CUmemAllocationType: 1 = pinned
    int requestedHandleTypes; // CUmemAllocationHandleType
    CUmemLocation location;
    void* win32HandleMetaData;
    struct {
        unsigned char compressionType;
        unsigned char gpuDirectRDMACapable;
        unsigned short usage;
        unsigned char reserved[4];
    } allocFlags;
};

constexpr int CU_MEM_LOCATION_TYPE_DEVICE = 1;

// Used by the simulated device (simdevice): VMM access control, the export-table id and the error
// codes it returns beyond those above.
constexpr CUresult CUDA_ERROR_INVALID_HANDLE = 400;
constexpr CUresult CUDA_ERROR_NOT_READY = 600;
constexpr CUresult CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED = 712;
constexpr CUresult CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED = 713;
constexpr cudaError_t cudaErrorInitializationError = 3;
constexpr cudaError_t cudaErrorInsufficientDriver = 35;

constexpr int CU_MEM_ALLOCATION_TYPE_PINNED = 1;
constexpr int CU_MEM_ACCESS_FLAGS_PROT_NONE = 0;
constexpr int CU_MEM_ACCESS_FLAGS_PROT_READ = 1;
constexpr int CU_MEM_ACCESS_FLAGS_PROT_READWRITE = 3;

struct CUmemAccessDesc {
    CUmemLocation location;
    int flags; // CUmemAccess_flags
};

struct CUuuid_st {
    char bytes[16];
};
using CUuuid = CUuuid_st;

// cudaGetDriverEntryPoint flags and query results.
constexpr unsigned long long cudaEnableDefault = 0;
constexpr unsigned long long cudaEnableLegacyStream = 1;
constexpr unsigned long long cudaEnablePerThreadDefaultStream = 2;
constexpr int cudaDriverEntryPointSuccess = 0;
constexpr int cudaDriverEntryPointSymbolNotFound = 1;
constexpr int cudaDriverEntryPointVersionNotSufficent = 2;

} // extern "C"
