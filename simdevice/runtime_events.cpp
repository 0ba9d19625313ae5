// Events: the driver's (driver_events.cpp), as the real runtime's are; cudaEvent_t is a CUevent.
#include "runtime_api.h"
#include "runtime_state.h"

using namespace gpuleak::sim;

extern "C" {

cudaError_t cudaEventCreate(cudaEvent_t* event) {
    return cudaEventCreateWithFlags(event, 0);
}

// cudaEventDefault, BlockingSync, DisableTiming and Interprocess are the driver's flags' values.
cudaError_t cudaEventCreateWithFlags(cudaEvent_t* event, unsigned int flags) {
    return with_context([&](const DriverFunctions& cu) { return cu.event_create(event, flags); });
}

cudaError_t cudaEventDestroy(cudaEvent_t event) {
    return with_context([&](const DriverFunctions& cu) { return cu.event_destroy(event); });
}

cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream) {
    return cudaEventRecordWithFlags(event, stream, 0);
}

cudaError_t cudaEventRecordWithFlags(cudaEvent_t event, cudaStream_t stream, unsigned int flags) {
    return with_context(
        [&](const DriverFunctions& cu) { return cu.event_record_with_flags(event, stream, flags); });
}

cudaError_t cudaEventQuery(cudaEvent_t event) {
    return with_context([&](const DriverFunctions& cu) { return cu.event_query(event); });
}

cudaError_t cudaEventSynchronize(cudaEvent_t event) {
    return with_context([&](const DriverFunctions& cu) { return cu.event_synchronize(event); });
}

cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t start, cudaEvent_t end) {
    return with_context([&](const DriverFunctions& cu) { return cu.event_elapsed_time(ms, start, end); });
}

} // extern "C"
