// Events, the driver's and so the runtime's (cudaEvent_t is a CUevent, as in CUDA). Work on a simulated
// stream is done when it is issued, so an event completes when it is recorded, and the time between two
// events is the host time between their recordings.
#include "device_state.h"
#include "driver_api.h"

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

// CU_EVENT_DEFAULT, BLOCKING_SYNC, DISABLE_TIMING, INTERPROCESS
constexpr unsigned int kEventFlags = 0x7;
constexpr unsigned int kDisableTiming = 0x2;
// CU_EVENT_RECORD_DEFAULT, CU_EVENT_RECORD_EXTERNAL; CU_EVENT_WAIT_DEFAULT, CU_EVENT_WAIT_EXTERNAL
constexpr unsigned int kRecordFlags = 0x1;
constexpr unsigned int kWaitFlags = 0x1;

std::mutex g_mutex;
std::unordered_set<CUevent> g_events;

bool known(CUevent event) {
    const std::lock_guard lock(g_mutex);
    return g_events.contains(event);
}

} // namespace

extern "C" {

CUresult cuEventCreate(CUevent* phEvent, unsigned int Flags) {
    int device = 0;
    if (const CUresult result = current_device(device); result != CUDA_SUCCESS) {
        return result;
    }
    if (phEvent == nullptr || (Flags & ~kEventFlags) != 0) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    auto* created = new CUevent_st{Flags, false, {}};
    const std::lock_guard lock(g_mutex);
    g_events.insert(created);
    *phEvent = created;
    return CUDA_SUCCESS;
}

CUresult cuEventDestroy_v2(CUevent hEvent) {
    {
        const std::lock_guard lock(g_mutex);
        if (g_events.erase(hEvent) == 0) {
            return CUDA_ERROR_INVALID_HANDLE;
        }
    }
    delete hEvent;
    return CUDA_SUCCESS;
}

CUresult cuEventRecordWithFlags(CUevent hEvent, CUstream hStream, unsigned int flags) {
    if ((flags & ~kRecordFlags) != 0) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    int device = 0;
    if (const CUresult result = stream_device(hStream, device); result != CUDA_SUCCESS) {
        return result;
    }
    const std::lock_guard lock(g_mutex);
    if (!g_events.contains(hEvent)) {
        return CUDA_ERROR_INVALID_HANDLE;
    }
    hEvent->recorded = true;
    hEvent->when = std::chrono::steady_clock::now();
    return CUDA_SUCCESS;
}

CUresult cuEventRecord(CUevent hEvent, CUstream hStream) {
    return cuEventRecordWithFlags(hEvent, hStream, 0);
}

// A known event is always complete, recorded or not (as on a GPU, where an event never recorded counts
// as complete).
CUresult cuEventQuery(CUevent hEvent) {
    return known(hEvent) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

CUresult cuEventSynchronize(CUevent hEvent) {
    return cuEventQuery(hEvent);
}

CUresult cuEventElapsedTime_v2(float* pMilliseconds, CUevent hStart, CUevent hEnd) {
    if (pMilliseconds == nullptr) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    const std::lock_guard lock(g_mutex);
    if (!g_events.contains(hStart) || !g_events.contains(hEnd) ||
        ((hStart->flags | hEnd->flags) & kDisableTiming) != 0) {
        return CUDA_ERROR_INVALID_HANDLE;
    }
    if (!hStart->recorded || !hEnd->recorded) {
        return CUDA_ERROR_NOT_READY;
    }
    *pMilliseconds = std::chrono::duration<float, std::milli>(hEnd->when - hStart->when).count();
    return CUDA_SUCCESS;
}

// Before CUDA 12.8 the same, under its first name.
CUresult cuEventElapsedTime(float* pMilliseconds, CUevent hStart, CUevent hEnd) {
    return cuEventElapsedTime_v2(pMilliseconds, hStart, hEnd);
}

// The work a simulated stream waits for is done already.
CUresult cuStreamWaitEvent(CUstream hStream, CUevent hEvent, unsigned int Flags) {
    if ((Flags & ~kWaitFlags) != 0) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    int device = 0;
    if (const CUresult result = stream_device(hStream, device); result != CUDA_SUCCESS) {
        return result;
    }
    return known(hEvent) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

} // extern "C"
