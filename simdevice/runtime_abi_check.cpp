// Compile-time check that runtime_abi.h lays its structures out as the installed CUDA toolkit's headers
// do: PyTorch allocates them from the real headers and the simulated runtime fills them, so one
// misplaced field would hand PyTorch garbage. Built only where the toolkit's headers are found; it has
// no code to run.
#include "runtime_abi.h"

#include <cstddef>

namespace real {
#include <cuda_runtime_api.h>
} // namespace real

#define GPULEAK_SAME_SIZE(type) static_assert(sizeof(::type) == sizeof(real::type), #type)
#define GPULEAK_SAME_OFFSET(type, field)                                                                     \
    static_assert(offsetof(::type, field) == offsetof(real::type, field), #type "." #field)

GPULEAK_SAME_SIZE(dim3);
GPULEAK_SAME_SIZE(uint3);
GPULEAK_SAME_SIZE(cudaDeviceProp);
GPULEAK_SAME_OFFSET(cudaDeviceProp, uuid);
GPULEAK_SAME_OFFSET(cudaDeviceProp, totalGlobalMem);
GPULEAK_SAME_OFFSET(cudaDeviceProp, major);
GPULEAK_SAME_OFFSET(cudaDeviceProp, multiProcessorCount);
GPULEAK_SAME_OFFSET(cudaDeviceProp, surfaceAlignment);
GPULEAK_SAME_OFFSET(cudaDeviceProp, l2CacheSize);
GPULEAK_SAME_OFFSET(cudaDeviceProp, sharedMemPerMultiprocessor);
GPULEAK_SAME_OFFSET(cudaDeviceProp, sharedMemPerBlockOptin);
GPULEAK_SAME_OFFSET(cudaDeviceProp, reservedSharedMemPerBlock);
GPULEAK_SAME_OFFSET(cudaDeviceProp, gpuPciSubsystemID);
GPULEAK_SAME_OFFSET(cudaDeviceProp, reserved);
GPULEAK_SAME_SIZE(cudaFuncAttributes);
GPULEAK_SAME_OFFSET(cudaFuncAttributes, maxThreadsPerBlock);
GPULEAK_SAME_OFFSET(cudaFuncAttributes, nonPortableClusterSizeAllowed);
GPULEAK_SAME_SIZE(cudaPointerAttributes);
GPULEAK_SAME_OFFSET(cudaPointerAttributes, devicePointer);
GPULEAK_SAME_SIZE(cudaLaunchConfig_t);
GPULEAK_SAME_OFFSET(cudaLaunchConfig_t, stream);
GPULEAK_SAME_OFFSET(cudaLaunchConfig_t, numAttrs);
GPULEAK_SAME_SIZE(cudaIpcEventHandle_t);
GPULEAK_SAME_SIZE(cudaIpcMemHandle_t);
GPULEAK_SAME_SIZE(cudaUUID_t);

static_assert(cudaErrorNotReady == real::cudaErrorNotReady);
static_assert(cudaErrorNotSupported == real::cudaErrorNotSupported);
static_assert(cudaErrorInvalidResourceHandle == real::cudaErrorInvalidResourceHandle);
static_assert(cudaErrorPeerAccessAlreadyEnabled == real::cudaErrorPeerAccessAlreadyEnabled);
static_assert(cudaErrorStreamCaptureUnsupported == real::cudaErrorStreamCaptureUnsupported);
static_assert(cudaErrorInvalidDeviceFunction == real::cudaErrorInvalidDeviceFunction);
