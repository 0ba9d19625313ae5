// Kernel launches. Kernels never run on the simulated device: a launch checks what a GPU would check
// before running it (the kernel is registered, the stream exists) and does nothing else, so device memory
// contents are meaningless while its accounting stays exact.
#include "module_registry.h"
#include "runtime_api.h"
#include "runtime_state.h"

#include <algorithm>

using namespace gpuleak::sim;

namespace {

// The configuration `kernel<<<grid, block, shared, stream>>>` pushes before calling the host stub, which
// pops it: a stack per thread, since a stub may be launched while another's configuration is pushed.
struct CallConfiguration {
    dim3 grid;
    dim3 block;
    std::size_t shared;
    cudaStream_t stream;
};

constexpr int kMaxPushed = 16;
thread_local CallConfiguration t_configurations[kMaxPushed];
thread_local int t_pushed = 0;

// As for cudaDeviceProp::maxThreadsPerMultiProcessor and maxBlocksPerMultiProcessor (driver_attributes.cpp).
constexpr int kThreadsPerMultiprocessor = 2048;
constexpr int kBlocksPerMultiprocessor = 32;

cudaError_t launch(const void* kernel, cudaStream_t stream) {
    if (!known_kernel(kernel)) {
        return record_error(cudaErrorInvalidDeviceFunction);
    }
    return with_context([&](const DriverFunctions& cu) { return cu.stream_query(stream); });
}

cudaError_t occupancy(int* numBlocks, const void* func, int blockSize) {
    if (numBlocks == nullptr || blockSize <= 0) {
        return record_error(cudaErrorInvalidValue);
    }
    if (!known_kernel(func)) {
        return record_error(cudaErrorInvalidDeviceFunction);
    }
    *numBlocks = std::clamp(kThreadsPerMultiprocessor / blockSize, 1, kBlocksPerMultiprocessor);
    return cudaSuccess;
}

} // namespace

extern "C" {

unsigned __cudaPushCallConfiguration(dim3 gridDim, dim3 blockDim, size_t sharedMem, cudaStream_t stream) {
    if (t_pushed == kMaxPushed) {
        return 1;
    }
    t_configurations[t_pushed++] = CallConfiguration{gridDim, blockDim, sharedMem, stream};
    return 0;
}

cudaError_t __cudaPopCallConfiguration(dim3* gridDim, dim3* blockDim, size_t* sharedMem, void* stream) {
    if (t_pushed == 0) {
        return record_error(cudaErrorInvalidValue);
    }
    const CallConfiguration& configuration = t_configurations[--t_pushed];
    *gridDim = configuration.grid;
    *blockDim = configuration.block;
    *sharedMem = configuration.shared;
    *static_cast<cudaStream_t*>(stream) = configuration.stream;
    return cudaSuccess;
}

cudaError_t __cudaLaunchKernel(cudaKernel_t kernel, dim3 /*gridDim*/, dim3 /*blockDim*/, void** /*args*/,
                               size_t /*sharedMem*/, cudaStream_t stream) {
    return launch(kernel, stream);
}

cudaError_t __cudaLaunchKernel_ptsz(cudaKernel_t kernel, dim3 /*gridDim*/, dim3 /*blockDim*/, void** /*args*/,
                                    size_t /*sharedMem*/, cudaStream_t stream) {
    return launch(kernel, stream);
}

cudaError_t cudaLaunchKernel(const void* func, dim3 /*gridDim*/, dim3 /*blockDim*/, void** /*args*/,
                             size_t /*sharedMem*/, cudaStream_t stream) {
    return launch(func, stream);
}

cudaError_t cudaLaunchKernelExC(const cudaLaunchConfig_t* config, const void* func, void** /*args*/) {
    if (config == nullptr) {
        return record_error(cudaErrorInvalidValue);
    }
    return launch(func, config->stream);
}

cudaError_t cudaLaunchCooperativeKernel(const void* func, dim3 /*gridDim*/, dim3 /*blockDim*/,
                                        void** /*args*/, size_t /*sharedMem*/, cudaStream_t stream) {
    return launch(func, stream);
}

cudaError_t cudaOccupancyMaxActiveBlocksPerMultiprocessor(int* numBlocks, const void* func, int blockSize,
                                                          size_t /*dynamicSMemSize*/) {
    return occupancy(numBlocks, func, blockSize);
}

cudaError_t cudaOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(int* numBlocks, const void* func,
                                                                   int blockSize, size_t /*dynamicSMemSize*/,
                                                                   unsigned int /*flags*/) {
    return occupancy(numBlocks, func, blockSize);
}

} // extern "C"
