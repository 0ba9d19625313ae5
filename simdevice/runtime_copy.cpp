// Copies and fills, through the driver's (driver_copies.cpp, driver_writes.cpp) as the real runtime's
// go: the contents mean nothing (kernels never run) but copies keep them, so that data written from the
// host reads back.
#include "runtime_api.h"
#include "runtime_state.h"

using namespace gpuleak::sim;

namespace {

// cudaMemcpyHostToHost (0) to cudaMemcpyDefault (4).
constexpr cudaMemcpyKind kLastCopyKind = 4;

CUdeviceptr address(const void* pointer) {
    return reinterpret_cast<CUdeviceptr>(pointer);
}

bool valid_kind(cudaMemcpyKind kind) {
    return kind >= 0 && kind <= kLastCopyKind;
}

} // namespace

extern "C" {

cudaError_t cudaMemcpy(void* dst, const void* src, size_t count, cudaMemcpyKind kind) {
    return with_context([&](const DriverFunctions& cu) {
        return valid_kind(kind) ? cu.memcpy(address(dst), address(src), count) : CUDA_ERROR_INVALID_VALUE;
    });
}

cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t count, cudaMemcpyKind kind,
                            cudaStream_t stream) {
    return with_context([&](const DriverFunctions& cu) {
        return valid_kind(kind) ? cu.memcpy_async(address(dst), address(src), count, stream)
                                : CUDA_ERROR_INVALID_VALUE;
    });
}

cudaError_t cudaMemcpy2DAsync(void* dst, size_t dpitch, const void* src, size_t spitch, size_t width,
                              size_t height, cudaMemcpyKind kind, cudaStream_t stream) {
    return with_context([&](const DriverFunctions& cu) {
        if (!valid_kind(kind) || width > dpitch || width > spitch) {
            return CUDA_ERROR_INVALID_VALUE;
        }
        CUresult result = cu.stream_query(stream);
        for (size_t row = 0; row < height && result == CUDA_SUCCESS; ++row) {
            result = cu.memcpy_async(address(static_cast<char*>(dst) + row * dpitch),
                                     address(static_cast<const char*>(src) + row * spitch), width, stream);
        }
        return result;
    });
}

cudaError_t cudaMemcpyPeerAsync(void* dst, int /*dstDevice*/, const void* src, int /*srcDevice*/,
                                size_t count, cudaStream_t stream) {
    return cudaMemcpyAsync(dst, src, count, 4, stream);
}

// The runtime's fill takes an int of which only the low byte counts, as cuMemsetD8 does.
cudaError_t cudaMemset(void* devPtr, int value, size_t count) {
    return with_context([&](const DriverFunctions& cu) {
        return cu.memset_d8(address(devPtr), static_cast<unsigned char>(value), count);
    });
}

cudaError_t cudaMemsetAsync(void* devPtr, int value, size_t count, cudaStream_t stream) {
    return with_context([&](const DriverFunctions& cu) {
        return cu.memset_d8_async(address(devPtr), static_cast<unsigned char>(value), count, stream);
    });
}

} // extern "C"
