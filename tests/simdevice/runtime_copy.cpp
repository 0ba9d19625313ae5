// Copies and fills. Device memory is host memory in this process, so every direction is a plain copy;
// the contents mean nothing (kernels never run) but copies keep them, so that data written from the host
// reads back. Asynchronous forms complete before they return, as nothing on a simulated stream waits.
#include "runtime_api.h"
#include "runtime_state.h"

#include <cstring>

using namespace gpuleak::sim;

namespace {

// cudaMemcpyHostToHost (0) to cudaMemcpyDefault (4).
constexpr cudaMemcpyKind kLastCopyKind = 4;

CUresult copy(void* dst, const void* src, std::size_t count, cudaMemcpyKind kind) {
    if (kind < 0 || kind > kLastCopyKind || (count > 0 && (dst == nullptr || src == nullptr))) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    if (count > 0) {
        std::memmove(dst, src, count);
    }
    return CUDA_SUCCESS;
}

CUresult fill(void* devPtr, int value, std::size_t count) {
    if (count > 0 && devPtr == nullptr) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    if (count > 0) {
        std::memset(devPtr, value, count);
    }
    return CUDA_SUCCESS;
}

} // namespace

extern "C" {

cudaError_t cudaMemcpy(void* dst, const void* src, size_t count, cudaMemcpyKind kind) {
    return with_context([&](const DriverFunctions&) { return copy(dst, src, count, kind); });
}

cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t count, cudaMemcpyKind kind,
                            cudaStream_t stream) {
    return with_context([&](const DriverFunctions& cu) {
        const CUresult result = cu.stream_query(stream);
        return result != CUDA_SUCCESS ? result : copy(dst, src, count, kind);
    });
}

cudaError_t cudaMemcpy2DAsync(void* dst, size_t dpitch, const void* src, size_t spitch, size_t width,
                              size_t height, cudaMemcpyKind kind, cudaStream_t stream) {
    return with_context([&](const DriverFunctions& cu) {
        if (width > dpitch || width > spitch) {
            return CUDA_ERROR_INVALID_VALUE;
        }
        CUresult result = cu.stream_query(stream);
        for (size_t row = 0; row < height && result == CUDA_SUCCESS; ++row) {
            result = copy(static_cast<char*>(dst) + row * dpitch,
                          static_cast<const char*>(src) + row * spitch, width, kind);
        }
        return result;
    });
}

cudaError_t cudaMemcpyPeerAsync(void* dst, int /*dstDevice*/, const void* src, int /*srcDevice*/,
                                size_t count, cudaStream_t stream) {
    return cudaMemcpyAsync(dst, src, count, 4, stream);
}

cudaError_t cudaMemset(void* devPtr, int value, size_t count) {
    return with_context([&](const DriverFunctions&) { return fill(devPtr, value, count); });
}

cudaError_t cudaMemsetAsync(void* devPtr, int value, size_t count, cudaStream_t stream) {
    return with_context([&](const DriverFunctions& cu) {
        const CUresult result = cu.stream_query(stream);
        return result != CUDA_SUCCESS ? result : fill(devPtr, value, count);
    });
}

} // extern "C"
