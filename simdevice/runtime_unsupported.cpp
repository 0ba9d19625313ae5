// Runtime calls PyTorch links against that the simulator does not model: interprocess memory and event
// handles (torch.multiprocessing's CUDA tensor sharing) fail with cudaErrorNotSupported; the profiler
// switches and the stream-ordered pool's attributes are accepted and change nothing.
#include "runtime_api.h"
#include "runtime_state.h"

#include <cstring>

using namespace gpuleak::sim;

namespace {

cudaError_t unsupported() {
    return record_error(cudaErrorNotSupported);
}

// cudaMemPoolAttrReleaseThreshold (4) to cudaMemPoolAttrUsedMemHigh (8) are 64-bit; the rest are ints.
bool wide_pool_attribute(cudaMemPoolAttr attr) {
    return attr >= 4 && attr <= 8;
}

} // namespace

extern "C" {

cudaError_t cudaIpcGetMemHandle(cudaIpcMemHandle_t* /*handle*/, void* /*devPtr*/) {
    return unsupported();
}

cudaError_t cudaIpcOpenMemHandle(void** /*devPtr*/, cudaIpcMemHandle_t /*handle*/, unsigned int /*flags*/) {
    return unsupported();
}

cudaError_t cudaIpcCloseMemHandle(void* /*devPtr*/) {
    return unsupported();
}

cudaError_t cudaIpcGetEventHandle(cudaIpcEventHandle_t* /*handle*/, cudaEvent_t /*event*/) {
    return unsupported();
}

cudaError_t cudaIpcOpenEventHandle(cudaEvent_t* /*event*/, cudaIpcEventHandle_t /*handle*/) {
    return unsupported();
}

cudaError_t cudaProfilerStart(void) {
    return cudaSuccess;
}

cudaError_t cudaProfilerStop(void) {
    return cudaSuccess;
}

// The simulated pool holds nothing back (driver_memory.cpp frees at once), so every counter reads 0.
cudaError_t cudaMemPoolGetAttribute(cudaMemPool_t memPool, cudaMemPoolAttr attr, void* value) {
    if (memPool == nullptr || value == nullptr) {
        return record_error(cudaErrorInvalidValue);
    }
    std::memset(value, 0, wide_pool_attribute(attr) ? sizeof(cuuint64_t) : sizeof(int));
    return cudaSuccess;
}

cudaError_t cudaMemPoolSetAttribute(cudaMemPool_t memPool, cudaMemPoolAttr /*attr*/, void* value) {
    return record_error(memPool == nullptr || value == nullptr ? cudaErrorInvalidValue : cudaSuccess);
}

cudaError_t cudaMemPoolSetAccess(cudaMemPool_t memPool, const cudaMemAccessDesc* /*descList*/,
                                 size_t /*count*/) {
    return record_error(memPool == nullptr ? cudaErrorInvalidValue : cudaSuccess);
}

} // extern "C"
