// Primary contexts, the calling thread's current context, and streams.
#include "device_state.h"
#include "driver_api.h"
#include "host_functions.h"

#include <utility>

using namespace gpuleak::sim;

namespace {

// CU_STREAM_CAPTURE_STATUS_NONE
constexpr int kNotCapturing = 0;

CUresult context_or_current(CUcontext ctx, int& device) {
    if (ctx == nullptr) {
        return current_device(device);
    }
    if (!devices_initialized()) {
        return CUDA_ERROR_NOT_INITIALIZED;
    }
    device = context_device(ctx);
    return device < 0 ? CUDA_ERROR_INVALID_CONTEXT : CUDA_SUCCESS;
}

} // namespace

extern "C" {

CUresult cuDevicePrimaryCtxRetain(CUcontext* pctx, CUdevice dev) {
    if (!devices_initialized()) {
        return CUDA_ERROR_NOT_INITIALIZED;
    }
    if (pctx == nullptr) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    if (!valid_device(dev)) {
        return CUDA_ERROR_INVALID_DEVICE;
    }
    retain_primary_context(dev);
    *pctx = primary_context(dev);
    return CUDA_SUCCESS;
}

CUresult cuDevicePrimaryCtxRelease_v2(CUdevice dev) {
    if (!devices_initialized()) {
        return CUDA_ERROR_NOT_INITIALIZED;
    }
    if (!valid_device(dev)) {
        return CUDA_ERROR_INVALID_DEVICE;
    }
    return release_primary_context(dev) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_CONTEXT;
}

// A primary context is active while retained; the simulator keeps no scheduling flags.
CUresult cuDevicePrimaryCtxGetState(CUdevice dev, unsigned int* flags, int* active) {
    if (!devices_initialized()) {
        return CUDA_ERROR_NOT_INITIALIZED;
    }
    if (flags == nullptr || active == nullptr) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    if (!valid_device(dev)) {
        return CUDA_ERROR_INVALID_DEVICE;
    }
    *flags = 0;
    *active = primary_context_active(dev) ? 1 : 0;
    return CUDA_SUCCESS;
}

CUresult cuCtxSetCurrent(CUcontext ctx) {
    if (!devices_initialized()) {
        return CUDA_ERROR_NOT_INITIALIZED;
    }
    if (ctx != nullptr && context_device(ctx) < 0) {
        return CUDA_ERROR_INVALID_CONTEXT;
    }
    set_current_context(ctx);
    return CUDA_SUCCESS;
}

CUresult cuCtxGetCurrent(CUcontext* pctx) {
    if (!devices_initialized()) {
        return CUDA_ERROR_NOT_INITIALIZED;
    }
    if (pctx == nullptr) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    *pctx = current_context();
    return CUDA_SUCCESS;
}

CUresult cuCtxGetDevice(CUdevice* device) {
    return cuCtxGetDevice_v2(device, nullptr);
}

CUresult cuCtxGetDevice_v2(CUdevice* device, CUcontext ctx) {
    if (device == nullptr) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    int ordinal = 0;
    if (const CUresult result = context_or_current(ctx, ordinal); result != CUDA_SUCCESS) {
        return result;
    }
    *device = ordinal;
    return CUDA_SUCCESS;
}

// Nothing ever runs on a simulated device, so there is never anything to wait for.
CUresult cuCtxSynchronize(void) {
    return cuCtxSynchronize_v2(nullptr);
}

// Synchronising waits for the host functions enqueued so far, which are the only work that is not done
// when issued.
CUresult cuCtxSynchronize_v2(CUcontext ctx) {
    int device = 0;
    const CUresult result = context_or_current(ctx, device);
    if (result == CUDA_SUCCESS) {
        wait_for_host_functions();
    }
    return result;
}

CUresult cuStreamCreate(CUstream* phStream, unsigned int Flags) {
    return cuStreamCreateWithPriority(phStream, Flags, kLowestStreamPriority);
}

CUresult cuStreamCreateWithPriority(CUstream* phStream, unsigned int flags, int priority) {
    int device = 0;
    if (const CUresult result = current_device(device); result != CUDA_SUCCESS) {
        return result;
    }
    // CU_STREAM_DEFAULT (0) and CU_STREAM_NON_BLOCKING (1) are the only flags.
    if (phStream == nullptr || flags > 1) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    *phStream = create_stream(device, priority);
    return CUDA_SUCCESS;
}

CUresult cuStreamGetPriority(CUstream hStream, int* priority) {
    if (priority == nullptr) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    int value = 0;
    if (const CUresult result = stream_priority(hStream, value); result != CUDA_SUCCESS) {
        return result;
    }
    *priority = value;
    return CUDA_SUCCESS;
}

CUresult cuCtxGetStreamPriorityRange(int* leastPriority, int* greatestPriority) {
    int device = 0;
    if (const CUresult result = current_device(device); result != CUDA_SUCCESS) {
        return result;
    }
    if (leastPriority != nullptr) {
        *leastPriority = kLowestStreamPriority;
    }
    if (greatestPriority != nullptr) {
        *greatestPriority = kHighestStreamPriority;
    }
    return CUDA_SUCCESS;
}

CUresult cuStreamDestroy_v2(CUstream hStream) {
    if (!devices_initialized()) {
        return CUDA_ERROR_NOT_INITIALIZED;
    }
    return destroy_stream(hStream) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

CUresult cuStreamSynchronize(CUstream hStream) {
    int device = 0;
    const CUresult result = stream_device(hStream, device);
    if (result == CUDA_SUCCESS) {
        wait_for_host_functions();
    }
    return result;
}

CUresult cuLaunchHostFunc(CUstream hStream, CUhostFn fn, void* userData) {
    int device = 0;
    if (fn == nullptr) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    const CUresult result = stream_device(hStream, device);
    if (result == CUDA_SUCCESS) {
        enqueue_host_function([=] { fn(userData); });
    }
    return result;
}

CUresult cuStreamAddCallback(CUstream hStream, CUstreamCallback callback, void* userData,
                             unsigned int flags) {
    int device = 0;
    if (callback == nullptr || flags != 0) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    const CUresult result = stream_device(hStream, device);
    if (result == CUDA_SUCCESS) {
        enqueue_host_function([=] { callback(hStream, CUDA_SUCCESS, userData); });
    }
    return result;
}

// Work on a simulated stream completes when it is issued, so a valid stream is always idle.
CUresult cuStreamQuery(CUstream hStream) {
    int device = 0;
    return stream_device(hStream, device);
}

// The thread's stream capture interaction mode, the runtime's too (it asks the driver), as in CUDA. The
// simulator never captures, so the mode changes nothing, but it reads back as it was set.
CUresult cuThreadExchangeStreamCaptureMode(CUstreamCaptureMode* mode) {
    thread_local CUstreamCaptureMode t_capture_mode = CU_STREAM_CAPTURE_MODE_GLOBAL;
    if (mode == nullptr || *mode < CU_STREAM_CAPTURE_MODE_GLOBAL || *mode > CU_STREAM_CAPTURE_MODE_RELAXED) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    std::swap(*mode, t_capture_mode);
    return CUDA_SUCCESS;
}

// No stream ever captures (see the runtime's runtime_capture.cpp, which asks here).
CUresult cuStreamIsCapturing(CUstream hStream, int* captureStatus) {
    if (captureStatus == nullptr) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    int device = 0;
    const CUresult result = stream_device(hStream, device);
    if (result == CUDA_SUCCESS) {
        *captureStatus = kNotCapturing;
    }
    return result;
}

} // extern "C"
