// The wrappers of the LOOKUP rows: functions that hand out driver function pointers. A pointer to a
// function of the table is replaced by its hook (with the pointer bound as that row's real function),
// so programs and the runtime that call the driver through such pointers are seen too. Any other
// pointer, cuGetExportTable's tables included, passes through untouched, as do all return values.
//
// Unlike the symbol hooks these wrap even when nested inside another hook: the runtime resolves the
// driver through cuGetProcAddress while inside cudaGetDriverEntryPoint, and those pointers must not
// escape. They record nothing, so they need no HookScope.
#include <dlfcn.h>

#include <cstring>
#include <limits>

#include "hooks/entry_points.h"
#include "hooks/real_functions.h"

namespace gpuleak {
namespace {

// cudaGetDriverEntryPoint takes no version: it hands out the newest the driver has.
constexpr int kNewestVersion = std::numeric_limits<int>::max();

int as_version(unsigned int version) {
    return version > static_cast<unsigned int>(kNewestVersion) ? kNewestVersion : static_cast<int>(version);
}

// The _ptsz lookups exist for programs built for the per-thread default stream: their default means
// per-thread.
unsigned long long per_thread_by_default(unsigned long long flags) {
    return flags == cudaEnableDefault ? cudaEnablePerThreadDefaultStream : flags;
}

// Which row a lookup of `base` that returned `function` handed out, if any.
std::optional<EntryPoint> row_handed_out(const char* base, const void* function, int version,
                                         uint64_t flags) {
    // By address first: the version rules below could mistake a function for its sibling.
    if (void* driver = loaded_library(Library::DRIVER)) {
        for (std::size_t i = 0; i < kEntryPointCount; ++i) {
            const auto row = static_cast<EntryPoint>(i);
            const EntryPointInfo& info = entry_point_info(row);
            if (info.library == Library::DRIVER && std::strcmp(info.base, base) == 0 &&
                real_dlsym(driver, info.symbol) == function) {
                return row;
            }
        }
    }
    // An exported function is known by its name; one that is none of our rows (a version newer than
    // the table, say) has a signature we do not know and must not be wrapped.
    Dl_info symbol;
    if (dladdr(function, &symbol) != 0 && symbol.dli_saddr == function && symbol.dli_sname != nullptr) {
        const auto row = entry_point_by_symbol(symbol.dli_sname);
        if (row && entry_point_info(*row).library == Library::DRIVER &&
            std::strcmp(entry_point_info(*row).base, base) == 0) {
            return row;
        }
        return std::nullopt;
    }
    // The driver's own unexported implementation: only the table's version rules can tell.
    return entry_point_by_base(base, version, flags);
}

void wrap_handed_out(const char* base, void** function, int version, uint64_t flags) {
    if (base == nullptr || function == nullptr || *function == nullptr || entry_point_by_wrapper(*function)) {
        return;
    }
    if (const auto row = row_handed_out(base, *function, version, flags)) {
        bind_real(*row, *function);
        *function = entry_point_info(*row).wrapper;
    }
}

} // namespace

#define GPULEAK_LOOKUP(lib, sym, base, since, streams, params, args) GPULEAK_EXPORT_HOOK(lib, sym, params)
#include "gpuleak/cuda_entry_points.def"

extern "C" CUresult gpuleak_hook_cuGetProcAddress(const char* symbol, void** pfn, int cudaVersion,
                                                  cuuint64_t flags) {
    const auto real =
        real_function_as<decltype(&gpuleak_hook_cuGetProcAddress)>(EntryPoint::cuGetProcAddress);
    if (real == nullptr) {
        return kMissingFunctionError<Library::DRIVER>;
    }
    const CUresult rc = real(symbol, pfn, cudaVersion, flags);
    if (rc == CUDA_SUCCESS) {
        wrap_handed_out(symbol, pfn, cudaVersion, flags);
    }
    return rc;
}

extern "C" CUresult gpuleak_hook_cuGetProcAddress_v2(const char* symbol, void** pfn, int cudaVersion,
                                                     cuuint64_t flags,
                                                     CUdriverProcAddressQueryResult* symbolStatus) {
    const auto real =
        real_function_as<decltype(&gpuleak_hook_cuGetProcAddress_v2)>(EntryPoint::cuGetProcAddress_v2);
    if (real == nullptr) {
        return kMissingFunctionError<Library::DRIVER>;
    }
    const CUresult rc = real(symbol, pfn, cudaVersion, flags, symbolStatus);
    if (rc == CUDA_SUCCESS && (symbolStatus == nullptr || *symbolStatus == CU_GET_PROC_ADDRESS_SUCCESS)) {
        wrap_handed_out(symbol, pfn, cudaVersion, flags);
    }
    return rc;
}

extern "C" cudaError_t gpuleak_hook_cudaGetDriverEntryPoint(const char* symbol, void** funcPtr,
                                                            unsigned long long flags,
                                                            cudaDriverEntryPointQueryResult* driverStatus) {
    const auto real = real_function_as<decltype(&gpuleak_hook_cudaGetDriverEntryPoint)>(
        EntryPoint::cudaGetDriverEntryPoint);
    if (real == nullptr) {
        return kMissingFunctionError<Library::RUNTIME>;
    }
    const cudaError_t rc = real(symbol, funcPtr, flags, driverStatus);
    if (rc == cudaSuccess && (driverStatus == nullptr || *driverStatus == cudaDriverEntryPointSuccess)) {
        wrap_handed_out(symbol, funcPtr, kNewestVersion, flags);
    }
    return rc;
}

extern "C" cudaError_t
gpuleak_hook_cudaGetDriverEntryPoint_ptsz(const char* symbol, void** funcPtr, unsigned long long flags,
                                          cudaDriverEntryPointQueryResult* driverStatus) {
    const auto real = real_function_as<decltype(&gpuleak_hook_cudaGetDriverEntryPoint_ptsz)>(
        EntryPoint::cudaGetDriverEntryPoint_ptsz);
    if (real == nullptr) {
        return kMissingFunctionError<Library::RUNTIME>;
    }
    const cudaError_t rc = real(symbol, funcPtr, flags, driverStatus);
    if (rc == cudaSuccess && (driverStatus == nullptr || *driverStatus == cudaDriverEntryPointSuccess)) {
        wrap_handed_out(symbol, funcPtr, kNewestVersion, per_thread_by_default(flags));
    }
    return rc;
}

extern "C" cudaError_t
gpuleak_hook_cudaGetDriverEntryPointByVersion(const char* symbol, void** funcPtr, unsigned int cudaVersion,
                                              unsigned long long flags,
                                              cudaDriverEntryPointQueryResult* driverStatus) {
    const auto real = real_function_as<decltype(&gpuleak_hook_cudaGetDriverEntryPointByVersion)>(
        EntryPoint::cudaGetDriverEntryPointByVersion);
    if (real == nullptr) {
        return kMissingFunctionError<Library::RUNTIME>;
    }
    const cudaError_t rc = real(symbol, funcPtr, cudaVersion, flags, driverStatus);
    if (rc == cudaSuccess && (driverStatus == nullptr || *driverStatus == cudaDriverEntryPointSuccess)) {
        wrap_handed_out(symbol, funcPtr, as_version(cudaVersion), flags);
    }
    return rc;
}

extern "C" cudaError_t
gpuleak_hook_cudaGetDriverEntryPointByVersion_ptsz(const char* symbol, void** funcPtr,
                                                   unsigned int cudaVersion, unsigned long long flags,
                                                   cudaDriverEntryPointQueryResult* driverStatus) {
    const auto real = real_function_as<decltype(&gpuleak_hook_cudaGetDriverEntryPointByVersion_ptsz)>(
        EntryPoint::cudaGetDriverEntryPointByVersion_ptsz);
    if (real == nullptr) {
        return kMissingFunctionError<Library::RUNTIME>;
    }
    const cudaError_t rc = real(symbol, funcPtr, cudaVersion, flags, driverStatus);
    if (rc == cudaSuccess && (driverStatus == nullptr || *driverStatus == cudaDriverEntryPointSuccess)) {
        wrap_handed_out(symbol, funcPtr, as_version(cudaVersion), per_thread_by_default(flags));
    }
    return rc;
}

} // namespace gpuleak
