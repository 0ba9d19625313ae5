// Runtime allocation calls, each forwarded to its driver twin. Out-parameters are written only on
// success, so that a failed allocation leaves them untouched as on a GPU.
#include "runtime_api.h"
#include "runtime_state.h"

using namespace gpuleak::sim;

namespace {

// The runtime asks for the widest element size the driver accepts; the pitch does not depend on it here.
constexpr unsigned int kPitchElementSize = 16;

template <typename Allocate> CUresult allocate_device_pointer(void** out, Allocate&& allocate) {
    if (out == nullptr) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    CUdeviceptr address = 0;
    const CUresult result = allocate(&address);
    if (result == CUDA_SUCCESS) {
        *out = reinterpret_cast<void*>(address);
    }
    return result;
}

CUdeviceptr device_pointer(void* pointer) {
    return reinterpret_cast<CUdeviceptr>(pointer);
}

} // namespace

extern "C" {

// A zero-byte cudaMalloc succeeds with NULL, unlike cuMemAlloc, which refuses zero bytes.
cudaError_t cudaMalloc(void** devPtr, size_t size) {
    return with_context([&](const DriverFunctions& cu) {
        if (devPtr != nullptr && size == 0) {
            *devPtr = nullptr;
            return CUDA_SUCCESS;
        }
        return allocate_device_pointer(devPtr, [&](CUdeviceptr* d) { return cu.mem_alloc(d, size); });
    });
}

cudaError_t cudaMallocManaged(void** devPtr, size_t size, unsigned int flags) {
    return with_context([&](const DriverFunctions& cu) {
        return allocate_device_pointer(devPtr,
                                       [&](CUdeviceptr* d) { return cu.mem_alloc_managed(d, size, flags); });
    });
}

cudaError_t cudaMallocPitch(void** devPtr, size_t* pitch, size_t width, size_t height) {
    return with_context([&](const DriverFunctions& cu) {
        if (pitch == nullptr) {
            return CUDA_ERROR_INVALID_VALUE;
        }
        size_t allocated_pitch = 0;
        const CUresult result = allocate_device_pointer(devPtr, [&](CUdeviceptr* d) {
            return cu.mem_alloc_pitch(d, &allocated_pitch, width, height, kPitchElementSize);
        });
        if (result == CUDA_SUCCESS) {
            *pitch = allocated_pitch;
        }
        return result;
    });
}

cudaError_t cudaMalloc3D(cudaPitchedPtr* pitchedDevPtr, cudaExtent extent) {
    return with_context([&](const DriverFunctions& cu) {
        if (pitchedDevPtr == nullptr) {
            return CUDA_ERROR_INVALID_VALUE;
        }
        CUdeviceptr address = 0;
        size_t pitch = 0;
        const CUresult result = cu.mem_alloc_pitch(&address, &pitch, extent.width,
                                                   extent.height * extent.depth, kPitchElementSize);
        if (result == CUDA_SUCCESS) {
            *pitchedDevPtr =
                cudaPitchedPtr{reinterpret_cast<void*>(address), pitch, extent.width, extent.height};
        }
        return result;
    });
}

cudaError_t cudaMallocHost(void** ptr, size_t size) {
    return with_context([&](const DriverFunctions& cu) { return cu.mem_alloc_host(ptr, size); });
}

cudaError_t cudaHostAlloc(void** pHost, size_t size, unsigned int flags) {
    return with_context([&](const DriverFunctions& cu) { return cu.mem_host_alloc(pHost, size, flags); });
}

// cudaFree(NULL) is the idiom for "initialise the runtime now": it binds the context and succeeds.
cudaError_t cudaFree(void* devPtr) {
    return with_context([&](const DriverFunctions& cu) {
        return devPtr == nullptr ? CUDA_SUCCESS : cu.mem_free(device_pointer(devPtr));
    });
}

cudaError_t cudaFreeHost(void* ptr) {
    return with_context([&](const DriverFunctions& cu) { return cu.mem_free_host(ptr); });
}

cudaError_t cudaMallocAsync(void** devPtr, size_t size, cudaStream_t hStream) {
    return with_context([&](const DriverFunctions& cu) {
        return allocate_device_pointer(devPtr,
                                       [&](CUdeviceptr* d) { return cu.mem_alloc_async(d, size, hStream); });
    });
}

cudaError_t cudaMallocAsync_ptsz(void** devPtr, size_t size, cudaStream_t hStream) {
    return with_context([&](const DriverFunctions& cu) {
        return allocate_device_pointer(
            devPtr, [&](CUdeviceptr* d) { return cu.mem_alloc_async_ptsz(d, size, hStream); });
    });
}

cudaError_t cudaMallocFromPoolAsync(void** ptr, size_t size, cudaMemPool_t memPool, cudaStream_t stream) {
    return with_context([&](const DriverFunctions& cu) {
        return allocate_device_pointer(
            ptr, [&](CUdeviceptr* d) { return cu.mem_alloc_from_pool_async(d, size, memPool, stream); });
    });
}

cudaError_t cudaMallocFromPoolAsync_ptsz(void** ptr, size_t size, cudaMemPool_t memPool,
                                         cudaStream_t stream) {
    return with_context([&](const DriverFunctions& cu) {
        return allocate_device_pointer(
            ptr, [&](CUdeviceptr* d) { return cu.mem_alloc_from_pool_async_ptsz(d, size, memPool, stream); });
    });
}

cudaError_t cudaFreeAsync(void* devPtr, cudaStream_t hStream) {
    return with_context(
        [&](const DriverFunctions& cu) { return cu.mem_free_async(device_pointer(devPtr), hStream); });
}

cudaError_t cudaFreeAsync_ptsz(void* devPtr, cudaStream_t hStream) {
    return with_context(
        [&](const DriverFunctions& cu) { return cu.mem_free_async_ptsz(device_pointer(devPtr), hStream); });
}

cudaError_t cudaMemPoolTrimTo(cudaMemPool_t memPool, size_t minBytesToKeep) {
    return with_context(
        [&](const DriverFunctions& cu) { return cu.mem_pool_trim_to(memPool, minBytesToKeep); });
}

} // extern "C"
