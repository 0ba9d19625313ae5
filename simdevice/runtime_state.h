// The runtime's per-thread state (current device, last error) and the path every call takes to the
// driver.
#pragma once

#include "driver_link.h"

#include <utility>

namespace gpuleak::sim {

// The driver codes the simulated driver returns carry the same numbers as their runtime twins
// (CUDA_ERROR_OUT_OF_MEMORY is cudaErrorMemoryAllocation, CUDA_ERROR_NOT_FOUND is cudaErrorSymbolNotFound,
// ...), so the translation keeps the number.
cudaError_t from_driver(CUresult result);

// Returns `error`, remembering it as the thread's last error when it is a failure.
cudaError_t record_error(cudaError_t error);
cudaError_t take_last_error();
cudaError_t peek_last_error();

int selected_device();
// Retains `device`'s primary context and makes it current on the calling thread.
cudaError_t select_device(const DriverFunctions& cu, int device);
// The driver, with the selected device's primary context current on the calling thread: the real runtime
// makes it current lazily on a thread's first call that needs a device.
cudaError_t bind_thread_context(const DriverFunctions*& cu);

// Runs `call` (taking the driver's functions, returning a CUresult) with the thread's context bound, and
// records the outcome as the runtime does.
template <typename Call> cudaError_t with_context(Call&& call) {
    const DriverFunctions* cu = nullptr;
    cudaError_t error = bind_thread_context(cu);
    if (error == cudaSuccess) {
        error = from_driver(std::forward<Call>(call)(*cu));
    }
    return record_error(error);
}

// The same for a question about a device (its properties, an attribute): the real runtime answers those
// from the driver without making a context, so a program that looks at every device before it picks one
// (PyTorch's start) holds a context on none of them.
template <typename Call> cudaError_t with_driver(Call&& call) {
    const DriverFunctions* cu = driver_functions();
    return record_error(cu == nullptr ? cudaErrorInsufficientDriver
                                      : from_driver(std::forward<Call>(call)(*cu)));
}

} // namespace gpuleak::sim
