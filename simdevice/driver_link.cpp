#include "driver_link.h"

#include <dlfcn.h>
#include <mutex>

namespace gpuleak::sim {
namespace {

class Resolver {
  public:
    explicit Resolver(decltype(&cuGetProcAddress_v2) lookup) : lookup_(lookup) {}

    template <typename Function> void operator()(Function& out, const char* base, cuuint64_t flags) {
        void* function = nullptr;
        CUdriverProcAddressQueryResult status = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
        if (lookup_(base, &function, kCudaVersion, flags, &status) != CUDA_SUCCESS || function == nullptr) {
            complete_ = false;
        }
        out = reinterpret_cast<Function>(function);
    }

    bool complete() const { return complete_; }

  private:
    decltype(&cuGetProcAddress_v2) lookup_;
    bool complete_ = true;
};

bool load(DriverFunctions& cu) {
    void* driver = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (driver == nullptr) {
        return false;
    }
    const auto lookup =
        reinterpret_cast<decltype(&cuGetProcAddress_v2)>(dlsym(driver, "cuGetProcAddress_v2"));
    if (lookup == nullptr) {
        return false;
    }
    constexpr cuuint64_t kLegacy = CU_GET_PROC_ADDRESS_LEGACY_STREAM;
    constexpr cuuint64_t kPerThread = CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM;
    Resolver resolve(lookup);
    resolve(cu.get_proc_address, "cuGetProcAddress", kLegacy);
    resolve(cu.init, "cuInit", kLegacy);
    resolve(cu.driver_get_version, "cuDriverGetVersion", kLegacy);
    resolve(cu.device_get_count, "cuDeviceGetCount", kLegacy);
    resolve(cu.device_get_default_mem_pool, "cuDeviceGetDefaultMemPool", kLegacy);
    resolve(cu.device_get_attribute, "cuDeviceGetAttribute", kLegacy);
    resolve(cu.device_get_name, "cuDeviceGetName", kLegacy);
    resolve(cu.device_total_mem, "cuDeviceTotalMem", kLegacy);
    resolve(cu.device_get_uuid, "cuDeviceGetUuid", kLegacy);
    resolve(cu.device_get_pci_bus_id, "cuDeviceGetPCIBusId", kLegacy);
    resolve(cu.primary_ctx_retain, "cuDevicePrimaryCtxRetain", kLegacy);
    resolve(cu.ctx_set_current, "cuCtxSetCurrent", kLegacy);
    resolve(cu.ctx_synchronize, "cuCtxSynchronize", kLegacy);
    resolve(cu.stream_create, "cuStreamCreate", kLegacy);
    resolve(cu.stream_create_with_priority, "cuStreamCreateWithPriority", kLegacy);
    resolve(cu.stream_get_priority, "cuStreamGetPriority", kLegacy);
    resolve(cu.stream_query, "cuStreamQuery", kLegacy);
    resolve(cu.thread_exchange_stream_capture_mode, "cuThreadExchangeStreamCaptureMode", kLegacy);
    resolve(cu.ctx_get_stream_priority_range, "cuCtxGetStreamPriorityRange", kLegacy);
    resolve(cu.stream_destroy, "cuStreamDestroy", kLegacy);
    resolve(cu.stream_synchronize, "cuStreamSynchronize", kLegacy);
    resolve(cu.stream_wait_event, "cuStreamWaitEvent", kLegacy);
    resolve(cu.launch_host_func, "cuLaunchHostFunc", kLegacy);
    resolve(cu.stream_add_callback, "cuStreamAddCallback", kLegacy);
    resolve(cu.event_create, "cuEventCreate", kLegacy);
    resolve(cu.event_destroy, "cuEventDestroy", kLegacy);
    resolve(cu.event_record_with_flags, "cuEventRecordWithFlags", kLegacy);
    resolve(cu.event_query, "cuEventQuery", kLegacy);
    resolve(cu.event_synchronize, "cuEventSynchronize", kLegacy);
    resolve(cu.event_elapsed_time, "cuEventElapsedTime", kLegacy);
    resolve(cu.mem_get_info, "cuMemGetInfo", kLegacy);
    resolve(cu.mem_alloc, "cuMemAlloc", kLegacy);
    resolve(cu.mem_alloc_pitch, "cuMemAllocPitch", kLegacy);
    resolve(cu.mem_alloc_managed, "cuMemAllocManaged", kLegacy);
    resolve(cu.mem_alloc_host, "cuMemAllocHost", kLegacy);
    resolve(cu.mem_host_alloc, "cuMemHostAlloc", kLegacy);
    resolve(cu.mem_free, "cuMemFree", kLegacy);
    resolve(cu.mem_free_host, "cuMemFreeHost", kLegacy);
    resolve(cu.mem_host_register, "cuMemHostRegister", kLegacy);
    resolve(cu.mem_host_unregister, "cuMemHostUnregister", kLegacy);
    resolve(cu.mem_alloc_async, "cuMemAllocAsync", kLegacy);
    resolve(cu.mem_alloc_async_ptsz, "cuMemAllocAsync", kPerThread);
    resolve(cu.mem_free_async, "cuMemFreeAsync", kLegacy);
    resolve(cu.mem_free_async_ptsz, "cuMemFreeAsync", kPerThread);
    resolve(cu.mem_alloc_from_pool_async, "cuMemAllocFromPoolAsync", kLegacy);
    resolve(cu.mem_alloc_from_pool_async_ptsz, "cuMemAllocFromPoolAsync", kPerThread);
    resolve(cu.mem_pool_trim_to, "cuMemPoolTrimTo", kLegacy);
    resolve(cu.mem_pool_get_attribute, "cuMemPoolGetAttribute", kLegacy);
    resolve(cu.mem_pool_set_attribute, "cuMemPoolSetAttribute", kLegacy);
    resolve(cu.mem_pool_set_access, "cuMemPoolSetAccess", kLegacy);
    resolve(cu.pointer_get_attributes, "cuPointerGetAttributes", kLegacy);
    resolve(cu.memcpy, "cuMemcpy", kLegacy);
    resolve(cu.memcpy_async, "cuMemcpyAsync", kLegacy);
    resolve(cu.memset_d8, "cuMemsetD8", kLegacy);
    resolve(cu.memset_d8_async, "cuMemsetD8Async", kLegacy);
    resolve(cu.module_load_data, "cuModuleLoadData", kLegacy);
    resolve(cu.module_get_function, "cuModuleGetFunction", kLegacy);
    resolve(cu.module_unload, "cuModuleUnload", kLegacy);
    return resolve.complete() && cu.init(0) == CUDA_SUCCESS;
}

} // namespace

// The driver stays loaded for the life of the process, as with the real runtime.
const DriverFunctions* driver_functions() {
    static DriverFunctions cu{};
    static bool loaded = false;
    static std::once_flag once;
    std::call_once(once, [] { loaded = load(cu); });
    return loaded ? &cu : nullptr;
}

} // namespace gpuleak::sim
