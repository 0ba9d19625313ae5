// Runtime calls about streams, each forwarded to the driver, and the host functions placed on them.
// Nothing issued to a simulated stream is ever pending, so waits end at once and queries say "done".
#include "runtime_api.h"
#include "runtime_state.h"

using namespace gpuleak::sim;

namespace {

// cudaStreamDefault (0) and cudaStreamNonBlocking (1), as for the driver.
constexpr unsigned int kStreamFlags = 0x1;

} // namespace

extern "C" {

cudaError_t cudaStreamCreate(cudaStream_t* pStream) {
    return with_context([&](const DriverFunctions& cu) { return cu.stream_create(pStream, 0); });
}

cudaError_t cudaStreamCreateWithFlags(cudaStream_t* pStream, unsigned int flags) {
    return with_context([&](const DriverFunctions& cu) {
        return (flags & ~kStreamFlags) != 0 ? CUDA_ERROR_INVALID_VALUE : cu.stream_create(pStream, flags);
    });
}

cudaError_t cudaStreamCreateWithPriority(cudaStream_t* pStream, unsigned int flags, int priority) {
    return with_context([&](const DriverFunctions& cu) {
        return (flags & ~kStreamFlags) != 0 ? CUDA_ERROR_INVALID_VALUE
                                            : cu.stream_create_with_priority(pStream, flags, priority);
    });
}

cudaError_t cudaStreamDestroy(cudaStream_t stream) {
    return with_context([&](const DriverFunctions& cu) { return cu.stream_destroy(stream); });
}

cudaError_t cudaStreamSynchronize(cudaStream_t stream) {
    return with_context([&](const DriverFunctions& cu) { return cu.stream_synchronize(stream); });
}

cudaError_t cudaStreamQuery(cudaStream_t stream) {
    return with_context([&](const DriverFunctions& cu) { return cu.stream_query(stream); });
}

cudaError_t cudaStreamGetPriority(cudaStream_t hStream, int* priority) {
    return with_context([&](const DriverFunctions& cu) { return cu.stream_get_priority(hStream, priority); });
}

cudaError_t cudaDeviceGetStreamPriorityRange(int* leastPriority, int* greatestPriority) {
    return with_context([&](const DriverFunctions& cu) {
        return cu.ctx_get_stream_priority_range(leastPriority, greatestPriority);
    });
}

cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event, unsigned int flags) {
    return with_context(
        [&](const DriverFunctions& cu) { return cu.stream_wait_event(stream, event, flags); });
}

// The driver's: a host function runs on its worker thread (driver_context.cpp).
cudaError_t cudaStreamAddCallback(cudaStream_t stream, cudaStreamCallback_t callback, void* userData,
                                  unsigned int flags) {
    return with_context(
        [&](const DriverFunctions& cu) { return cu.stream_add_callback(stream, callback, userData, flags); });
}

cudaError_t cudaLaunchHostFunc(cudaStream_t stream, cudaHostFn_t fn, void* userData) {
    return with_context([&](const DriverFunctions& cu) { return cu.launch_host_func(stream, fn, userData); });
}

} // extern "C"
