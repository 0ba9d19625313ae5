// cuGetProcAddress: hands out driver functions by base name, picking the symbol that matches the caller's
// CUDA version and default-stream mode, the way the real driver does. The returned pointers are the
// addresses of our own definitions (the library is linked -Bsymbolic), never of a preloaded interposer's
// function of the same name.
#include "driver_api.h"

#include <dlfcn.h>

#include <cstdio>
#include <mutex>
#include <set>
#include <string>
#include <string_view>

namespace {

enum class Streams { NO_STREAM, LEGACY_STREAM, PER_THREAD_STREAM };

struct ProcEntry {
    std::string_view base;
    int since;
    Streams streams;
    void* function;
};

template <typename Function> void* address_of(Function* function) {
    return reinterpret_cast<void*>(function);
}

const ProcEntry kProcTable[] = {
#define GPULEAK_SIM_ROW_DRIVER(sym, base, since, streams, params)                                            \
    {#base, since, Streams::streams, address_of(&sym)},
#define GPULEAK_SIM_ROW_RUNTIME(sym, base, since, streams, params)
#include "entry_point_rows.inc"
    {"cuInit", 2000, Streams::NO_STREAM, address_of(&cuInit)},
    {"cuDriverGetVersion", 2020, Streams::NO_STREAM, address_of(&cuDriverGetVersion)},
    {"cuDeviceGet", 2000, Streams::NO_STREAM, address_of(&cuDeviceGet)},
    {"cuDeviceGetCount", 2000, Streams::NO_STREAM, address_of(&cuDeviceGetCount)},
    {"cuDeviceGetName", 2000, Streams::NO_STREAM, address_of(&cuDeviceGetName)},
    {"cuDeviceTotalMem", 3020, Streams::NO_STREAM, address_of(&cuDeviceTotalMem_v2)},
    {"cuDeviceGetDefaultMemPool", 11020, Streams::NO_STREAM, address_of(&cuDeviceGetDefaultMemPool)},
    {"cuDeviceGetAttribute", 2000, Streams::NO_STREAM, address_of(&cuDeviceGetAttribute)},
    {"cuDeviceGetUuid", 9020, Streams::NO_STREAM, address_of(&cuDeviceGetUuid)},
    {"cuDeviceGetUuid", 11040, Streams::NO_STREAM, address_of(&cuDeviceGetUuid_v2)},
    {"cuDeviceGetPCIBusId", 4010, Streams::NO_STREAM, address_of(&cuDeviceGetPCIBusId)},
    {"cuDevicePrimaryCtxRelease", 11000, Streams::NO_STREAM, address_of(&cuDevicePrimaryCtxRelease_v2)},
    {"cuCtxSetCurrent", 4000, Streams::NO_STREAM, address_of(&cuCtxSetCurrent)},
    {"cuCtxGetCurrent", 4000, Streams::NO_STREAM, address_of(&cuCtxGetCurrent)},
    {"cuCtxGetDevice", 2000, Streams::NO_STREAM, address_of(&cuCtxGetDevice)},
    {"cuCtxGetDevice", 13000, Streams::NO_STREAM, address_of(&cuCtxGetDevice_v2)},
    {"cuCtxSynchronize", 2000, Streams::NO_STREAM, address_of(&cuCtxSynchronize)},
    {"cuCtxSynchronize", 13000, Streams::NO_STREAM, address_of(&cuCtxSynchronize_v2)},
    {"cuStreamCreate", 2000, Streams::NO_STREAM, address_of(&cuStreamCreate)},
    {"cuStreamCreateWithPriority", 5050, Streams::NO_STREAM, address_of(&cuStreamCreateWithPriority)},
    {"cuStreamGetPriority", 5050, Streams::NO_STREAM, address_of(&cuStreamGetPriority)},
    {"cuStreamQuery", 2000, Streams::NO_STREAM, address_of(&cuStreamQuery)},
    {"cuStreamIsCapturing", 10000, Streams::NO_STREAM, address_of(&cuStreamIsCapturing)},
    {"cuThreadExchangeStreamCaptureMode", 10010, Streams::NO_STREAM,
     address_of(&cuThreadExchangeStreamCaptureMode)},
    {"cuCtxGetStreamPriorityRange", 5050, Streams::NO_STREAM, address_of(&cuCtxGetStreamPriorityRange)},
    {"cuStreamDestroy", 4000, Streams::NO_STREAM, address_of(&cuStreamDestroy_v2)},
    {"cuStreamSynchronize", 2000, Streams::NO_STREAM, address_of(&cuStreamSynchronize)},
    {"cuStreamWaitEvent", 3020, Streams::NO_STREAM, address_of(&cuStreamWaitEvent)},
    {"cuLaunchHostFunc", 10000, Streams::NO_STREAM, address_of(&cuLaunchHostFunc)},
    {"cuStreamAddCallback", 5000, Streams::NO_STREAM, address_of(&cuStreamAddCallback)},
    {"cuEventCreate", 2000, Streams::NO_STREAM, address_of(&cuEventCreate)},
    {"cuEventDestroy", 4000, Streams::NO_STREAM, address_of(&cuEventDestroy_v2)},
    {"cuEventRecord", 2000, Streams::NO_STREAM, address_of(&cuEventRecord)},
    {"cuEventRecordWithFlags", 11010, Streams::NO_STREAM, address_of(&cuEventRecordWithFlags)},
    {"cuEventQuery", 2000, Streams::NO_STREAM, address_of(&cuEventQuery)},
    {"cuEventSynchronize", 2000, Streams::NO_STREAM, address_of(&cuEventSynchronize)},
    {"cuEventElapsedTime", 2000, Streams::NO_STREAM, address_of(&cuEventElapsedTime)},
    {"cuEventElapsedTime", 12080, Streams::NO_STREAM, address_of(&cuEventElapsedTime_v2)},
    {"cuMemGetInfo", 3020, Streams::NO_STREAM, address_of(&cuMemGetInfo_v2)},
    {"cuMemSetAccess", 10020, Streams::NO_STREAM, address_of(&cuMemSetAccess)},
    {"cuMemGetAllocationGranularity", 10020, Streams::NO_STREAM, address_of(&cuMemGetAllocationGranularity)},
    {"cuMemPoolGetAttribute", 11020, Streams::NO_STREAM, address_of(&cuMemPoolGetAttribute)},
    {"cuMemPoolSetAttribute", 11020, Streams::NO_STREAM, address_of(&cuMemPoolSetAttribute)},
    {"cuMemPoolSetAccess", 11020, Streams::NO_STREAM, address_of(&cuMemPoolSetAccess)},
    {"cuDevicePrimaryCtxGetState", 7000, Streams::NO_STREAM, address_of(&cuDevicePrimaryCtxGetState)},
    {"cuModuleLoad", 2000, Streams::NO_STREAM, address_of(&cuModuleLoad)},
    {"cuModuleLoadData", 2000, Streams::NO_STREAM, address_of(&cuModuleLoadData)},
    {"cuModuleLoadDataEx", 2010, Streams::NO_STREAM, address_of(&cuModuleLoadDataEx)},
    {"cuModuleLoadFatBinary", 2000, Streams::NO_STREAM, address_of(&cuModuleLoadFatBinary)},
    {"cuModuleUnload", 2000, Streams::NO_STREAM, address_of(&cuModuleUnload)},
    {"cuModuleGetFunction", 2000, Streams::NO_STREAM, address_of(&cuModuleGetFunction)},
    {"cuLinkCreate", 6050, Streams::NO_STREAM, address_of(&cuLinkCreate_v2)},
    {"cuLinkAddData", 6050, Streams::NO_STREAM, address_of(&cuLinkAddData_v2)},
    {"cuLinkComplete", 5050, Streams::NO_STREAM, address_of(&cuLinkComplete)},
    {"cuLinkDestroy", 5050, Streams::NO_STREAM, address_of(&cuLinkDestroy)},
    {"cuFuncGetAttribute", 2020, Streams::NO_STREAM, address_of(&cuFuncGetAttribute)},
    {"cuFuncSetAttribute", 9000, Streams::NO_STREAM, address_of(&cuFuncSetAttribute)},
    {"cuFuncSetCacheConfig", 3000, Streams::NO_STREAM, address_of(&cuFuncSetCacheConfig)},
    {"cuLaunchKernel", 4000, Streams::NO_STREAM, address_of(&cuLaunchKernel)},
    {"cuLaunchKernelEx", 11060, Streams::NO_STREAM, address_of(&cuLaunchKernelEx)},
    {"cuLaunchCooperativeKernel", 9000, Streams::NO_STREAM, address_of(&cuLaunchCooperativeKernel)},
    {"cuOccupancyMaxActiveBlocksPerMultiprocessor", 6050, Streams::NO_STREAM,
     address_of(&cuOccupancyMaxActiveBlocksPerMultiprocessor)},
    {"cuTensorMapEncodeTiled", 12000, Streams::NO_STREAM, address_of(&cuTensorMapEncodeTiled)},
    {"cuPointerGetAttribute", 4000, Streams::NO_STREAM, address_of(&cuPointerGetAttribute)},
    {"cuPointerGetAttributes", 7000, Streams::NO_STREAM, address_of(&cuPointerGetAttributes)},
    {"cuMemExportToShareableHandle", 10020, Streams::NO_STREAM, address_of(&cuMemExportToShareableHandle)},
    {"cuMemImportFromShareableHandle", 10020, Streams::NO_STREAM,
     address_of(&cuMemImportFromShareableHandle)},
    {"cuMemRetainAllocationHandle", 11000, Streams::NO_STREAM, address_of(&cuMemRetainAllocationHandle)},
    {"cuMemGetAllocationPropertiesFromHandle", 10020, Streams::NO_STREAM,
     address_of(&cuMemGetAllocationPropertiesFromHandle)},
    {"cuMemsetD8", 3020, Streams::NO_STREAM, address_of(&cuMemsetD8_v2)},
    {"cuMemsetD16", 3020, Streams::NO_STREAM, address_of(&cuMemsetD16_v2)},
    {"cuMemsetD32", 3020, Streams::NO_STREAM, address_of(&cuMemsetD32_v2)},
    {"cuMemsetD8Async", 3020, Streams::NO_STREAM, address_of(&cuMemsetD8Async)},
    {"cuMemsetD16Async", 3020, Streams::NO_STREAM, address_of(&cuMemsetD16Async)},
    {"cuMemsetD32Async", 3020, Streams::NO_STREAM, address_of(&cuMemsetD32Async)},
    {"cuMemcpy", 4000, Streams::NO_STREAM, address_of(&cuMemcpy)},
    {"cuMemcpyAsync", 4000, Streams::NO_STREAM, address_of(&cuMemcpyAsync)},
    {"cuMemcpyHtoD", 3020, Streams::NO_STREAM, address_of(&cuMemcpyHtoD_v2)},
    {"cuMemcpyDtoH", 3020, Streams::NO_STREAM, address_of(&cuMemcpyDtoH_v2)},
    {"cuMemcpyDtoD", 3020, Streams::NO_STREAM, address_of(&cuMemcpyDtoD_v2)},
    {"cuMemcpyHtoDAsync", 3020, Streams::NO_STREAM, address_of(&cuMemcpyHtoDAsync_v2)},
    {"cuMemcpyDtoHAsync", 3020, Streams::NO_STREAM, address_of(&cuMemcpyDtoHAsync_v2)},
    {"cuMemcpyDtoDAsync", 3020, Streams::NO_STREAM, address_of(&cuMemcpyDtoDAsync_v2)},
    {"cuMemcpyPeer", 4000, Streams::NO_STREAM, address_of(&cuMemcpyPeer)},
    {"cuMemcpyPeerAsync", 4000, Streams::NO_STREAM, address_of(&cuMemcpyPeerAsync)},
    {"cuStreamWriteValue32", 12000, Streams::NO_STREAM, address_of(&cuStreamWriteValue32)},
    {"cuGetErrorString", 6000, Streams::NO_STREAM, address_of(&cuGetErrorString)},
    {"cuGetErrorName", 6000, Streams::NO_STREAM, address_of(&cuGetErrorName)},
    {"cuGetExportTable", 3000, Streams::NO_STREAM, address_of(&cuGetExportTable)},
};

struct Lookup {
    const ProcEntry* entry = nullptr;
    bool name_known = false;
};

// The newest entry for `base` introduced at or before `version`; per_thread picks among the _ptsz entries,
// otherwise they are skipped.
Lookup find_entry(std::string_view base, int version, bool per_thread) {
    Lookup lookup;
    for (const ProcEntry& entry : kProcTable) {
        if (entry.base != base) {
            continue;
        }
        lookup.name_known = true;
        if ((entry.streams == Streams::PER_THREAD_STREAM) != per_thread || entry.since > version) {
            continue;
        }
        if (lookup.entry == nullptr || entry.since > lookup.entry->since) {
            lookup.entry = &entry;
        }
    }
    return lookup;
}

} // namespace

extern "C" {

CUresult cuGetProcAddress_v2(const char* symbol, void** pfn, int cudaVersion, cuuint64_t flags,
                             CUdriverProcAddressQueryResult* symbolStatus) {
    if (symbol == nullptr || pfn == nullptr || flags > CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    const bool per_thread = flags == CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM;
    Lookup lookup = find_entry(symbol, cudaVersion, per_thread);
    // A function without a per-thread variant serves both default-stream modes.
    if (per_thread && lookup.entry == nullptr) {
        lookup = find_entry(symbol, cudaVersion, false);
    }
    CUdriverProcAddressQueryResult status = CU_GET_PROC_ADDRESS_SUCCESS;
    if (lookup.entry == nullptr) {
        status = lookup.name_known ? CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT
                                   : CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    }
    if (symbolStatus != nullptr) {
        *symbolStatus = status;
    }
    *pfn = lookup.entry != nullptr ? lookup.entry->function : nullptr;
    return lookup.entry != nullptr ? CUDA_SUCCESS : CUDA_ERROR_NOT_FOUND;
}

CUresult cuGetProcAddress(const char* symbol, void** pfn, int cudaVersion, cuuint64_t flags) {
    return cuGetProcAddress_v2(symbol, pfn, cudaVersion, flags, nullptr);
}

// The driver's private tables are not simulated; the simulated runtime and BLAS libraries never ask for
// them. NVIDIA's own libraries do (a static libcudart inside them, CUPTI), and then fail with errors of
// their own that do not say why, so each library's first request says it on stderr.
CUresult cuGetExportTable(const void** ppExportTable, const CUuuid* /*pExportTableId*/) {
    Dl_info caller{};
    const bool known = dladdr(__builtin_return_address(0), &caller) != 0 && caller.dli_fname != nullptr;
    const std::string library = known ? caller.dli_fname : "a library";
    static std::mutex explained_lock;
    static std::set<std::string>* explained = new std::set<std::string>; // outlives exit-time callers
    bool first = false;
    {
        const std::lock_guard<std::mutex> hold(explained_lock);
        first = explained->insert(library).second;
    }
    if (first) {
        std::fprintf(stderr,
                     "gpuleak-sim: %s asked the simulated CUDA device for the driver's private export table, "
                     "which it does not have: NVIDIA's closed libraries cannot run on the simulated device\n",
                     library.c_str());
    }
    if (ppExportTable != nullptr) {
        *ppExportTable = nullptr;
    }
    return CUDA_ERROR_NOT_SUPPORTED;
}

} // extern "C"
