// Compile-time check that runtime_abi12.h lays out cudaDeviceProp as CUDA 12.9's driver_types.h does:
// TensorFlow's CUDA 12 build allocates it from those headers and the simulated libcudart.so.12 fills
// it. Built only where scripts/setup.sh has unpacked CUDA 12's runtime headers; no code to run.
#include "runtime_abi12.h"

#include <cstddef>

namespace real {
#include <cuda_runtime_api.h>
} // namespace real

static_assert(CUDART_VERSION / 1000 == 12, "these must be CUDA 12's headers");

#define GPULEAK_SAME_OFFSET(field)                                                                           \
    static_assert(offsetof(cuda12::cudaDeviceProp, field) == offsetof(real::cudaDeviceProp, field), #field)

static_assert(sizeof(cuda12::cudaDeviceProp) == sizeof(real::cudaDeviceProp));
GPULEAK_SAME_OFFSET(uuid);
GPULEAK_SAME_OFFSET(totalGlobalMem);
GPULEAK_SAME_OFFSET(clockRate);
GPULEAK_SAME_OFFSET(major);
GPULEAK_SAME_OFFSET(deviceOverlap);
GPULEAK_SAME_OFFSET(multiProcessorCount);
GPULEAK_SAME_OFFSET(computeMode);
GPULEAK_SAME_OFFSET(maxTexture1DLinear);
GPULEAK_SAME_OFFSET(surfaceAlignment);
GPULEAK_SAME_OFFSET(memoryClockRate);
GPULEAK_SAME_OFFSET(l2CacheSize);
GPULEAK_SAME_OFFSET(sharedMemPerMultiprocessor);
GPULEAK_SAME_OFFSET(singleToDoublePrecisionPerfRatio);
GPULEAK_SAME_OFFSET(cooperativeMultiDeviceLaunch);
GPULEAK_SAME_OFFSET(sharedMemPerBlockOptin);
GPULEAK_SAME_OFFSET(reservedSharedMemPerBlock);
GPULEAK_SAME_OFFSET(memoryPoolsSupported);
GPULEAK_SAME_OFFSET(unifiedFunctionPointers);
GPULEAK_SAME_OFFSET(reserved);
