// Writes the driver makes into device memory on a stream's behalf (cuMemsetD32Async, and the stream
// memory operation cuStreamWriteValue32 that PyTorch's expandable segments and signals use). Device
// memory is host memory here and nothing on a stream is pending, so each write happens before the call
// returns.
#include "device_state.h"
#include "driver_api.h"

#include <algorithm>
#include <cstdint>

using namespace gpuleak::sim;

extern "C" {

CUresult cuMemsetD32Async(CUdeviceptr dstDevice, unsigned int ui, size_t N, CUstream hStream) {
    int device = 0;
    if (const CUresult result = stream_device(hStream, device); result != CUDA_SUCCESS) {
        return result;
    }
    if (N > 0 && (dstDevice == 0 || dstDevice % alignof(std::uint32_t) != 0)) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    auto* words = reinterpret_cast<std::uint32_t*>(dstDevice);
    std::fill(words, words + N, ui);
    return CUDA_SUCCESS;
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
