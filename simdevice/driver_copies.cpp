// Copies through the driver, as XLA makes them, and the runtime's too (runtime_copy.cpp). With unified
// addressing every pointer is an address in this process, so each direction is one memmove. An
// asynchronous copy completes before it returns, as nothing on a simulated stream waits; a synchronous one
// first synchronises the context (the host functions already enqueued run), as on a GPU it waits for the
// work before it.
#include "device_state.h"
#include "driver_api.h"

#include <cstring>

using namespace gpuleak::sim;

namespace {

CUresult copy(CUdeviceptr dst, CUdeviceptr src, std::size_t bytes) {
    if (bytes == 0) {
        return CUDA_SUCCESS;
    }
    if (dst == 0 || src == 0) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    std::memmove(reinterpret_cast<void*>(dst), reinterpret_cast<const void*>(src), bytes);
    return CUDA_SUCCESS;
}

// After the current context's earlier work, as a synchronous copy starts.
CUresult copy_now(CUdeviceptr dst, CUdeviceptr src, std::size_t bytes) {
    const CUresult result = cuCtxSynchronize_v2(nullptr);
    return result == CUDA_SUCCESS ? copy(dst, src, bytes) : result;
}

CUresult copy_on(CUstream stream, CUdeviceptr dst, CUdeviceptr src, std::size_t bytes) {
    const CUresult result = cuStreamQuery(stream);
    return result == CUDA_SUCCESS ? copy(dst, src, bytes) : result;
}

CUdeviceptr address(const void* pointer) {
    return reinterpret_cast<CUdeviceptr>(pointer);
}

} // namespace

extern "C" {

CUresult cuMemcpy(CUdeviceptr dst, CUdeviceptr src, size_t ByteCount) {
    return copy_now(dst, src, ByteCount);
}

CUresult cuMemcpyAsync(CUdeviceptr dst, CUdeviceptr src, size_t ByteCount, CUstream hStream) {
    return copy_on(hStream, dst, src, ByteCount);
}

CUresult cuMemcpyHtoD_v2(CUdeviceptr dstDevice, const void* srcHost, size_t ByteCount) {
    return copy_now(dstDevice, address(srcHost), ByteCount);
}

CUresult cuMemcpyDtoH_v2(void* dstHost, CUdeviceptr srcDevice, size_t ByteCount) {
    return copy_now(address(dstHost), srcDevice, ByteCount);
}

CUresult cuMemcpyDtoD_v2(CUdeviceptr dstDevice, CUdeviceptr srcDevice, size_t ByteCount) {
    return copy_now(dstDevice, srcDevice, ByteCount);
}

CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr dstDevice, const void* srcHost, size_t ByteCount,
                              CUstream hStream) {
    return copy_on(hStream, dstDevice, address(srcHost), ByteCount);
}

CUresult cuMemcpyDtoHAsync_v2(void* dstHost, CUdeviceptr srcDevice, size_t ByteCount, CUstream hStream) {
    return copy_on(hStream, address(dstHost), srcDevice, ByteCount);
}

CUresult cuMemcpyDtoDAsync_v2(CUdeviceptr dstDevice, CUdeviceptr srcDevice, size_t ByteCount,
                              CUstream hStream) {
    return copy_on(hStream, dstDevice, srcDevice, ByteCount);
}

// Every simulated device shares this process's memory, so a copy between devices is any other copy.
CUresult cuMemcpyPeer(CUdeviceptr dstDevice, CUcontext dstContext, CUdeviceptr srcDevice,
                      CUcontext srcContext, size_t ByteCount) {
    if (context_device(dstContext) < 0 || context_device(srcContext) < 0) {
        return CUDA_ERROR_INVALID_CONTEXT;
    }
    return copy_now(dstDevice, srcDevice, ByteCount);
}

CUresult cuMemcpyPeerAsync(CUdeviceptr dstDevice, CUcontext dstContext, CUdeviceptr srcDevice,
                           CUcontext srcContext, size_t ByteCount, CUstream hStream) {
    if (context_device(dstContext) < 0 || context_device(srcContext) < 0) {
        return CUDA_ERROR_INVALID_CONTEXT;
    }
    return copy_on(hStream, dstDevice, srcDevice, ByteCount);
}

} // extern "C"
