// Events. Work on a simulated stream is done when it is issued, so an event completes when it is
// recorded, and the time between two events is the host time between their recordings.
#include "runtime_api.h"
#include "runtime_state.h"

#include <chrono>
#include <mutex>
#include <unordered_set>

struct CUevent_st {
    unsigned int flags;
    bool recorded;
    std::chrono::steady_clock::time_point when;
};

using namespace gpuleak::sim;

namespace {

// cudaEventDefault, BlockingSync, DisableTiming, Interprocess
constexpr unsigned int kEventFlags = 0x7;
// cudaEventRecordDefault, cudaEventRecordExternal
constexpr unsigned int kRecordFlags = 0x1;

std::mutex g_mutex;
std::unordered_set<cudaEvent_t> g_events;

cudaError_t record(cudaEvent_t event, cudaStream_t stream, unsigned int flags) {
    return with_context([&](const DriverFunctions& cu) {
        if ((flags & ~kRecordFlags) != 0) {
            return CUDA_ERROR_INVALID_VALUE;
        }
        if (const CUresult result = cu.stream_query(stream); result != CUDA_SUCCESS) {
            return result;
        }
        const std::lock_guard lock(g_mutex);
        if (!g_events.contains(event)) {
            return CUDA_ERROR_INVALID_HANDLE;
        }
        event->recorded = true;
        event->when = std::chrono::steady_clock::now();
        return CUDA_SUCCESS;
    });
}

// Query and synchronize: a known event is always complete, recorded or not (as on a GPU, where an event
// never recorded counts as complete).
cudaError_t check_event(cudaEvent_t event) {
    const std::lock_guard lock(g_mutex);
    return record_error(g_events.contains(event) ? cudaSuccess : cudaErrorInvalidResourceHandle);
}

} // namespace

extern "C" {

cudaError_t cudaEventCreate(cudaEvent_t* event) {
    return cudaEventCreateWithFlags(event, 0);
}

cudaError_t cudaEventCreateWithFlags(cudaEvent_t* event, unsigned int flags) {
    return with_context([&](const DriverFunctions&) {
        if (event == nullptr || (flags & ~kEventFlags) != 0) {
            return CUDA_ERROR_INVALID_VALUE;
        }
        auto* created = new CUevent_st{flags, false, {}};
        const std::lock_guard lock(g_mutex);
        g_events.insert(created);
        *event = created;
        return CUDA_SUCCESS;
    });
}

cudaError_t cudaEventDestroy(cudaEvent_t event) {
    {
        const std::lock_guard lock(g_mutex);
        if (g_events.erase(event) == 0) {
            return record_error(cudaErrorInvalidResourceHandle);
        }
    }
    delete event;
    return cudaSuccess;
}

cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream) {
    return record(event, stream, 0);
}

cudaError_t cudaEventRecordWithFlags(cudaEvent_t event, cudaStream_t stream, unsigned int flags) {
    return record(event, stream, flags);
}

cudaError_t cudaEventQuery(cudaEvent_t event) {
    return check_event(event);
}

cudaError_t cudaEventSynchronize(cudaEvent_t event) {
    return check_event(event);
}

cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t start, cudaEvent_t end) {
    if (ms == nullptr) {
        return record_error(cudaErrorInvalidValue);
    }
    const std::lock_guard lock(g_mutex);
    if (!g_events.contains(start) || !g_events.contains(end) ||
        ((start->flags | end->flags) & cudaEventDisableTiming) != 0) {
        return record_error(cudaErrorInvalidResourceHandle);
    }
    if (!start->recorded || !end->recorded) {
        return record_error(cudaErrorNotReady);
    }
    *ms = std::chrono::duration<float, std::milli>(end->when - start->when).count();
    return cudaSuccess;
}

} // extern "C"
