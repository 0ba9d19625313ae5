// The driver functions the simulated runtime calls. Like the real libcudart, it has no undefined cu*
// symbols: it dlopens libcuda.so.1 and resolves every function through cuGetProcAddress_v2, so that an
// interposer sees the runtime's driver traffic only through its dlsym and cuGetProcAddress hooks.
#pragma once

#include "driver_api.h"

#include <type_traits>

namespace gpuleak::sim {

// The CUDA release this build of the runtime stands in for (simdevice/CMakeLists.txt): what
// cudaRuntimeGetVersion says and the version the driver is asked for, as the real runtime of that
// release asks for its own.
inline constexpr int kCudaVersion = GPULEAK_SIM_CUDA_VERSION;

// CUDA 13.0 gave cuCtxSynchronize a context parameter; an older version gets the function without it.
using CtxSynchronize =
    std::conditional_t<kCudaVersion >= 13000, decltype(&cuCtxSynchronize_v2), decltype(&cuCtxSynchronize)>;

// Each pointer's type is that of the symbol the driver returns for kCudaVersion.
struct DriverFunctions {
    decltype(&cuGetProcAddress_v2) get_proc_address;
    decltype(&cuInit) init;
    decltype(&cuDriverGetVersion) driver_get_version;
    decltype(&cuDeviceGetCount) device_get_count;
    decltype(&cuDeviceGetDefaultMemPool) device_get_default_mem_pool;
    decltype(&cuDeviceGetAttribute) device_get_attribute;
    decltype(&cuDeviceGetName) device_get_name;
    decltype(&cuDeviceTotalMem_v2) device_total_mem;
    decltype(&cuDeviceGetUuid_v2) device_get_uuid;
    decltype(&cuDeviceGetPCIBusId) device_get_pci_bus_id;
    decltype(&cuDevicePrimaryCtxRetain) primary_ctx_retain;
    decltype(&cuCtxSetCurrent) ctx_set_current;
    CtxSynchronize ctx_synchronize;
    decltype(&cuStreamCreate) stream_create;
    decltype(&cuStreamCreateWithPriority) stream_create_with_priority;
    decltype(&cuStreamGetPriority) stream_get_priority;
    decltype(&cuStreamQuery) stream_query;
    decltype(&cuThreadExchangeStreamCaptureMode) thread_exchange_stream_capture_mode;
    decltype(&cuCtxGetStreamPriorityRange) ctx_get_stream_priority_range;
    decltype(&cuStreamDestroy_v2) stream_destroy;
    decltype(&cuStreamSynchronize) stream_synchronize;
    decltype(&cuStreamWaitEvent) stream_wait_event;
    decltype(&cuLaunchHostFunc) launch_host_func;
    decltype(&cuStreamAddCallback) stream_add_callback;
    decltype(&cuEventCreate) event_create;
    decltype(&cuEventDestroy_v2) event_destroy;
    decltype(&cuEventRecordWithFlags) event_record_with_flags;
    decltype(&cuEventQuery) event_query;
    decltype(&cuEventSynchronize) event_synchronize;
    decltype(&cuEventElapsedTime_v2) event_elapsed_time;
    decltype(&cuMemGetInfo_v2) mem_get_info;
    decltype(&cuMemAlloc_v2) mem_alloc;
    decltype(&cuMemAllocPitch_v2) mem_alloc_pitch;
    decltype(&cuMemAllocManaged) mem_alloc_managed;
    decltype(&cuMemAllocHost_v2) mem_alloc_host;
    decltype(&cuMemHostAlloc) mem_host_alloc;
    decltype(&cuMemFree_v2) mem_free;
    decltype(&cuMemFreeHost) mem_free_host;
    decltype(&cuMemHostRegister_v2) mem_host_register;
    decltype(&cuMemHostUnregister) mem_host_unregister;
    decltype(&cuMemAllocAsync) mem_alloc_async;
    decltype(&cuMemAllocAsync_ptsz) mem_alloc_async_ptsz;
    decltype(&cuMemFreeAsync) mem_free_async;
    decltype(&cuMemFreeAsync_ptsz) mem_free_async_ptsz;
    decltype(&cuMemAllocFromPoolAsync) mem_alloc_from_pool_async;
    decltype(&cuMemAllocFromPoolAsync_ptsz) mem_alloc_from_pool_async_ptsz;
    decltype(&cuMemPoolTrimTo) mem_pool_trim_to;
    decltype(&cuMemPoolGetAttribute) mem_pool_get_attribute;
    decltype(&cuMemPoolSetAttribute) mem_pool_set_attribute;
    decltype(&cuMemPoolSetAccess) mem_pool_set_access;
    decltype(&cuPointerGetAttributes) pointer_get_attributes;
    decltype(&cuMemcpy) memcpy;
    decltype(&cuMemcpyAsync) memcpy_async;
    decltype(&cuMemsetD8_v2) memset_d8;
    decltype(&cuMemsetD8Async) memset_d8_async;
    decltype(&cuModuleLoadData) module_load_data;
    decltype(&cuModuleGetFunction) module_get_function;
    decltype(&cuModuleUnload) module_unload;
};

// Waits for the current context's work through either form of cuCtxSynchronize.
inline CUresult synchronize_current_context(CUresult (*synchronize)(CUcontext)) {
    return synchronize(nullptr);
}
inline CUresult synchronize_current_context(CUresult (*synchronize)()) {
    return synchronize();
}

// Loads and initialises the driver on first use; nullptr when libcuda.so.1 cannot be loaded, lacks a
// function, or fails cuInit.
const DriverFunctions* driver_functions();

} // namespace gpuleak::sim
