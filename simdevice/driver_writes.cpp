// Writes the driver makes into device memory: fills (cuMemsetD8/D16/D32 and their stream forms, as XLA
// zeroes buffers with them), and the stream memory operation cuStreamWriteValue32 that PyTorch's expandable
// segments and signals use. Device memory is host memory here and nothing on a stream is pending, so each
// write happens before the call returns.
#include "device_state.h"
#include "driver_api.h"

#include <algorithm>
#include <cstdint>

using namespace gpuleak::sim;

namespace {

template <typename Element> CUresult fill(CUdeviceptr dst, Element value, std::size_t count) {
    if (count > 0 && (dst == 0 || dst % alignof(Element) != 0)) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    auto* elements = reinterpret_cast<Element*>(dst);
    std::fill(elements, elements + count, value);
    return CUDA_SUCCESS;
}

// A synchronous fill first synchronises the context, as it waits for earlier work.
template <typename Element> CUresult fill_now(CUdeviceptr dst, Element value, std::size_t count) {
    const CUresult result = cuCtxSynchronize_v2(nullptr);
    return result == CUDA_SUCCESS ? fill(dst, value, count) : result;
}

template <typename Element>
CUresult fill_on(CUstream stream, CUdeviceptr dst, Element value, std::size_t count) {
    const CUresult result = cuStreamQuery(stream);
    return result == CUDA_SUCCESS ? fill(dst, value, count) : result;
}

} // namespace

extern "C" {

CUresult cuMemsetD8_v2(CUdeviceptr dstDevice, unsigned char uc, size_t N) {
    return fill_now(dstDevice, uc, N);
}

CUresult cuMemsetD16_v2(CUdeviceptr dstDevice, unsigned short us, size_t N) {
    return fill_now(dstDevice, us, N);
}

CUresult cuMemsetD32_v2(CUdeviceptr dstDevice, unsigned int ui, size_t N) {
    return fill_now(dstDevice, ui, N);
}

CUresult cuMemsetD8Async(CUdeviceptr dstDevice, unsigned char uc, size_t N, CUstream hStream) {
    return fill_on(hStream, dstDevice, uc, N);
}

CUresult cuMemsetD16Async(CUdeviceptr dstDevice, unsigned short us, size_t N, CUstream hStream) {
    return fill_on(hStream, dstDevice, us, N);
}

CUresult cuMemsetD32Async(CUdeviceptr dstDevice, unsigned int ui, size_t N, CUstream hStream) {
    return fill_on(hStream, dstDevice, ui, N);
}

// The flags only order the write against other work, and there is no other work in flight.
CUresult cuStreamWriteValue32(CUstream stream, CUdeviceptr addr, std::uint32_t value,
                              unsigned int /*flags*/) {
    int device = 0;
    if (const CUresult result = stream_device(stream, device); result != CUDA_SUCCESS) {
        return result;
    }
    if (addr == 0 || addr % alignof(std::uint32_t) != 0) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    *reinterpret_cast<std::uint32_t*>(addr) = value;
    return CUDA_SUCCESS;
}

} // extern "C"
