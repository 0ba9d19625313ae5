// The driver functions the simulated runtime calls. Like the real libcudart, it has no undefined cu*
// symbols: it dlopens libcuda.so.1 and resolves every function through cuGetProcAddress_v2, so that an
// interposer sees the runtime's driver traffic only through its dlsym and cuGetProcAddress hooks.
#pragma once

#include "driver_api.h"

namespace gpuleak::sim {

inline constexpr int kCudaVersion = 13000;

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
    decltype(&cuCtxSynchronize_v2) ctx_synchronize;
    decltype(&cuStreamCreate) stream_create;
    decltype(&cuStreamCreateWithPriority) stream_create_with_priority;
    decltype(&cuStreamGetPriority) stream_get_priority;
    decltype(&cuStreamQuery) stream_query;
    decltype(&cuCtxGetStreamPriorityRange) ctx_get_stream_priority_range;
    decltype(&cuStreamDestroy_v2) stream_destroy;
    decltype(&cuStreamSynchronize) stream_synchronize;
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
};

// Loads and initialises the driver on first use; nullptr when libcuda.so.1 cannot be loaded, lacks a
// function, or fails cuInit.
const DriverFunctions* driver_functions();

} // namespace gpuleak::sim
