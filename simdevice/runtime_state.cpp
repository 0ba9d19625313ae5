#include "runtime_state.h"

#include <mutex>
#include <unordered_map>

namespace gpuleak::sim {
namespace {

static_assert(CUDA_ERROR_INVALID_VALUE == cudaErrorInvalidValue);
static_assert(CUDA_ERROR_OUT_OF_MEMORY == cudaErrorMemoryAllocation);
static_assert(CUDA_ERROR_NOT_INITIALIZED == cudaErrorInitializationError);
static_assert(CUDA_ERROR_INVALID_DEVICE == cudaErrorInvalidDevice);
static_assert(CUDA_ERROR_NOT_FOUND == cudaErrorSymbolNotFound);

thread_local cudaError_t t_last_error = cudaSuccess;
thread_local int t_device = 0;
thread_local bool t_context_bound = false;

// The runtime retains each device's primary context once and keeps it for the life of the process.
std::mutex g_mutex;
std::unordered_map<int, CUcontext> g_primary_contexts;

} // namespace

cudaError_t from_driver(CUresult result) {
    return static_cast<cudaError_t>(result);
}

cudaError_t record_error(cudaError_t error) {
    if (error != cudaSuccess) {
        t_last_error = error;
    }
    return error;
}

cudaError_t take_last_error() {
    return std::exchange(t_last_error, cudaSuccess);
}

cudaError_t peek_last_error() {
    return t_last_error;
}

int selected_device() {
    return t_device;
}

cudaError_t select_device(const DriverFunctions& cu, int device) {
    CUcontext context = nullptr;
    {
        const std::lock_guard lock(g_mutex);
        const auto found = g_primary_contexts.find(device);
        if (found != g_primary_contexts.end()) {
            context = found->second;
        } else {
            if (const CUresult result = cu.primary_ctx_retain(&context, device); result != CUDA_SUCCESS) {
                return from_driver(result);
            }
            g_primary_contexts.emplace(device, context);
        }
    }
    if (const CUresult result = cu.ctx_set_current(context); result != CUDA_SUCCESS) {
        return from_driver(result);
    }
    t_device = device;
    t_context_bound = true;
    return cudaSuccess;
}

cudaError_t bind_thread_context(const DriverFunctions*& cu) {
    cu = driver_functions();
    if (cu == nullptr) {
        return cudaErrorInsufficientDriver;
    }
    return t_context_bound ? cudaSuccess : select_device(*cu, t_device);
}

} // namespace gpuleak::sim
