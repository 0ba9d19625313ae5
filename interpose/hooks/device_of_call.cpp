#include "hooks/device_of_call.h"

#include <atomic>
#include <cstring>
#include <limits>

#include "hooks/entry_points.h"
#include "hooks/real_functions.h"

namespace gpuleak {
namespace {

using CudaGetDevice = cudaError_t (*)(int*);
using CuCtxGetDevice = CUresult (*)(CUdevice*);
using CuMemGetInfo = CUresult (*)(size_t*, size_t*);
using CuThreadExchangeStreamCaptureMode = CUresult (*)(CUstreamCaptureMode*);
using CuDeviceGetUuid = CUresult (*)(CUuuid*, CUdevice);

constinit std::atomic<void*> real_cuda_get_device{nullptr};
constinit std::atomic<void*> real_cu_ctx_get_device{nullptr};
constinit std::atomic<void*> real_cu_mem_get_info{nullptr};
constinit std::atomic<void*> real_cu_thread_exchange_stream_capture_mode{nullptr};
constinit std::atomic<void*> real_cu_device_get_uuid{nullptr};

// The first CUDA versions of the two cuGetProcAddress forms; cuCtxGetDevice and cuMemGetInfo_v2 are
// older than both.
constexpr int kProcAddressVersion = 11030;
constexpr int kProcAddressV2Version = 12000;

int16_t checked_device(int ordinal) {
    return ordinal >= 0 && ordinal <= std::numeric_limits<int16_t>::max() ? static_cast<int16_t>(ordinal)
                                                                          : kUnknownDevice;
}

// Not cached while not found: the library may still be loaded later.
template <void* (*Find)()> void* cached(std::atomic<void*>& slot) {
    void* function = slot.load(std::memory_order_acquire);
    if (function == nullptr) {
        function = Find();
        if (function != nullptr) {
            slot.store(function, std::memory_order_release);
        }
    }
    return function;
}

void* find_cuda_get_device() {
    return resolve_real_symbol(Library::RUNTIME, "cudaGetDevice");
}

// The driver's own cuGetProcAddress knows its functions even where they are not exported the usual way;
// `symbol` is the exported name of the same function, the fallback.
void* find_driver_function(const char* base, const char* symbol) {
    void* found = nullptr;
    if (const auto v2 = reinterpret_cast<decltype(&gpuleak_hook_cuGetProcAddress_v2)>(
            known_real_function(EntryPoint::cuGetProcAddress_v2))) {
        CUdriverProcAddressQueryResult status = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
        if (v2(base, &found, kProcAddressV2Version, CU_GET_PROC_ADDRESS_DEFAULT, &status) != CUDA_SUCCESS ||
            status != CU_GET_PROC_ADDRESS_SUCCESS) {
            found = nullptr;
        }
    } else if (const auto v1 = reinterpret_cast<decltype(&gpuleak_hook_cuGetProcAddress)>(
                   known_real_function(EntryPoint::cuGetProcAddress))) {
        if (v1(base, &found, kProcAddressVersion, CU_GET_PROC_ADDRESS_DEFAULT) != CUDA_SUCCESS) {
            found = nullptr;
        }
    }
    return found != nullptr ? found : resolve_real_symbol(Library::DRIVER, symbol);
}

void* find_cu_ctx_get_device() {
    return find_driver_function("cuCtxGetDevice", "cuCtxGetDevice");
}

void* find_cu_mem_get_info() {
    return find_driver_function("cuMemGetInfo", "cuMemGetInfo_v2");
}

void* find_cu_device_get_uuid() {
    return find_driver_function("cuDeviceGetUuid", "cuDeviceGetUuid_v2");
}

void* find_cu_thread_exchange_stream_capture_mode() {
    return find_driver_function("cuThreadExchangeStreamCaptureMode", "cuThreadExchangeStreamCaptureMode");
}

// Sets the calling thread's stream capture mode to relaxed for its lifetime, then back: a question to the
// driver that a capture under way (the program's, on any thread) might count as unsafe must never
// invalidate it.
class RelaxedCapture {
  public:
    RelaxedCapture()
        : exchange_(reinterpret_cast<CuThreadExchangeStreamCaptureMode>(
              cached<find_cu_thread_exchange_stream_capture_mode>(
                  real_cu_thread_exchange_stream_capture_mode))) {
        exchanged_ = exchange_ != nullptr && exchange_(&mode_) == CUDA_SUCCESS;
    }
    ~RelaxedCapture() {
        if (exchanged_) {
            exchange_(&mode_);
        }
    }
    RelaxedCapture(const RelaxedCapture&) = delete;
    RelaxedCapture& operator=(const RelaxedCapture&) = delete;

  private:
    CuThreadExchangeStreamCaptureMode exchange_;
    CUstreamCaptureMode mode_ = CU_STREAM_CAPTURE_MODE_RELAXED;
    bool exchanged_ = false;
};

} // namespace

int16_t runtime_device() {
    const auto get_device =
        reinterpret_cast<CudaGetDevice>(cached<find_cuda_get_device>(real_cuda_get_device));
    int device = -1;
    if (get_device == nullptr || get_device(&device) != cudaSuccess) {
        return kUnknownDevice;
    }
    return checked_device(device);
}

int16_t driver_device() {
    const auto get_device =
        reinterpret_cast<CuCtxGetDevice>(cached<find_cu_ctx_get_device>(real_cu_ctx_get_device));
    // Without a current context the driver fails and may leave the output as it was: start from a value
    // that checked_device rejects and trust the output only on success.
    CUdevice device = -1;
    if (get_device == nullptr || get_device(&device) != CUDA_SUCCESS) {
        return kUnknownDevice;
    }
    return checked_device(device);
}

bool driver_memory_info(uint64_t& free_bytes, uint64_t& total_bytes) {
    const auto get_info = reinterpret_cast<CuMemGetInfo>(cached<find_cu_mem_get_info>(real_cu_mem_get_info));
    if (get_info == nullptr) {
        return false;
    }
    size_t free_now = 0;
    size_t total = 0;
    const RelaxedCapture relaxed;
    if (get_info(&free_now, &total) != CUDA_SUCCESS || total == 0) {
        return false;
    }
    free_bytes = free_now;
    total_bytes = total;
    return true;
}

DeviceUuid device_uuid(int device) {
    DeviceUuid uuid{};
    const auto get_uuid =
        reinterpret_cast<CuDeviceGetUuid>(cached<find_cu_device_get_uuid>(real_cu_device_get_uuid));
    CUuuid answer{};
    if (get_uuid != nullptr && get_uuid(&answer, device) == CUDA_SUCCESS)
        std::memcpy(uuid.bytes.data(), answer.bytes, uuid.bytes.size());
    return uuid;
}

int16_t vmm_prop_device(const CUmemAllocationProp* prop) {
    if (prop == nullptr || prop->location.type != CU_MEM_LOCATION_TYPE_DEVICE) {
        return kUnknownDevice;
    }
    return checked_device(prop->location.id);
}

int16_t vmm_handle_device(CUmemGenericAllocationHandle handle) {
    return live_device_of(KeySpace::VmmHandle, handle);
}

} // namespace gpuleak
