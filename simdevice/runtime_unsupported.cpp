// Runtime calls PyTorch links against that the simulator does not model: interprocess memory and event
// handles (torch.multiprocessing's CUDA tensor sharing) fail with cudaErrorNotSupported; the profiler
// switches are accepted and change nothing. The stream-ordered pool's attributes go to the driver, as the
// real runtime's do.
#include "runtime_api.h"
#include "runtime_state.h"

using namespace gpuleak::sim;

namespace {

cudaError_t unsupported() {
    return record_error(cudaErrorNotSupported);
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

cudaError_t cudaMemPoolGetAttribute(cudaMemPool_t memPool, cudaMemPoolAttr attr, void* value) {
    return with_context(
        [&](const DriverFunctions& cu) { return cu.mem_pool_get_attribute(memPool, attr, value); });
}

cudaError_t cudaMemPoolSetAttribute(cudaMemPool_t memPool, cudaMemPoolAttr attr, void* value) {
    return with_context(
        [&](const DriverFunctions& cu) { return cu.mem_pool_set_attribute(memPool, attr, value); });
}

// cudaMemAccessDesc is CUmemAccessDesc's layout.
cudaError_t cudaMemPoolSetAccess(cudaMemPool_t memPool, const cudaMemAccessDesc* descList, size_t count) {
    return with_context([&](const DriverFunctions& cu) {
        return cu.mem_pool_set_access(memPool, reinterpret_cast<const CUmemAccessDesc*>(descList), count);
    });
}

} // extern "C"
