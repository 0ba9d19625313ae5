// The exported wrappers of the allocation, free and trim rows of cuda_entry_points.def: the program's
// calls bind to these, they call the real function and tell the recorder what happened. Return values
// and out-parameters pass through untouched.
#include <concepts>
#include <cstdint>

#include "hooks/device_of_call.h"
#include "hooks/entry_points.h"
#include "hooks/real_functions.h"
#include "hooks/torch_adapter_loader.h"
#include "recording/recorder.h"

namespace gpuleak {
namespace {

// The table's address, size and handle expressions are pointers, integers and handles of either kind.
template <class T> uint64_t as_u64(T* pointer) {
    return reinterpret_cast<uintptr_t>(pointer);
}

template <std::integral T> constexpr uint64_t as_u64(T value) {
    return static_cast<uint64_t>(value);
}

constexpr uint8_t api_of(EntryPoint row) {
    return static_cast<uint8_t>(row);
}

// The device's free memory per the driver now, also told to the recorder; kUnknownFreeBytes when the
// driver cannot say, or would answer for another device (it answers for the current context's, and a
// program may free another device's memory, or make it with an explicit device).
uint64_t free_device_memory(int16_t device) {
    uint64_t free_bytes = 0;
    uint64_t total_bytes = 0;
    if (device < 0 || driver_device() != device || !driver_memory_info(free_bytes, total_bytes)) {
        return kUnknownFreeBytes;
    }
    record_device_memory(device, free_bytes, total_bytes);
    return free_bytes;
}

// After an allocation or a free of device memory, when it is due: the driver's view over the run, for the
// timeline's samples.
void sample_device_memory(int16_t device) {
    if (claim_driver_view(device)) {
        free_device_memory(device);
    }
}

} // namespace

// Calls the real function of `sym` as `rc`; returns the library's missing-function error without one.
// A nested call (the runtime reaching the driver) is not recorded: `scope` says whether this is the
// outermost.
#define GPULEAK_CALL_REAL_(lib, sym, args)                                                                   \
    HookScope scope;                                                                                         \
    const auto real = real_function_as<decltype(&gpuleak_hook_##sym)>(EntryPoint::sym);                      \
    if (real == nullptr) {                                                                                   \
        return kMissingFunctionError<Library::lib>;                                                          \
    }                                                                                                        \
    const auto rc = real args;

// The device column is evaluated before the call: were cudaGetDevice to fail after a failed
// allocation it would replace the runtime's sticky last error that the program reads next; before
// the call, the allocation's own outcome sets that error last.
#define GPULEAK_ALLOC(lib, sym, base, since, streams, memory_kind, params, args, ptr_expr, size_expr,        \
                      requested_expr, device_expr, stream_expr)                                              \
    GPULEAK_EXPORT_HOOK(lib, sym, params)                                                                    \
    extern "C" ResultOf<Library::lib> gpuleak_hook_##sym params {                                            \
        const int16_t device = HookScope::nested() ? kUnknownDevice : (device_expr);                         \
        /* Before the real call: PyTorch's allocator then reports this very segment to the adapter. */       \
        if (torch_adapter_waiting() && !HookScope::nested()) {                                               \
            notice_allocation_caller(__builtin_return_address(0));                                           \
        }                                                                                                    \
        GPULEAK_CALL_REAL_(lib, sym, args)                                                                   \
        if (scope.outermost()) {                                                                             \
            if (rc == kSuccessOf<Library::lib>) {                                                            \
                const uint64_t address = as_u64(ptr_expr);                                                   \
                if (address != 0) {                                                                          \
                    record_alloc({.kind = MemoryKind::memory_kind,                                           \
                                  .address = address,                                                        \
                                  .size = as_u64(size_expr),                                                 \
                                  .device = device,                                                          \
                                  .stream = as_u64(stream_expr),                                             \
                                  .api = api_of(EntryPoint::sym)});                                          \
                    if (format::occupies_device_memory(MemoryKind::memory_kind)) {                           \
                        sample_device_memory(device);                                                        \
                    }                                                                                        \
                }                                                                                            \
            } else {                                                                                         \
                /* Out-parameters are not read: on failure they hold whatever the caller left there. */      \
                record_alloc_failure({.kind = MemoryKind::memory_kind,                                       \
                                      .address = 0,                                                          \
                                      .size = as_u64(requested_expr),                                        \
                                      .device = device,                                                      \
                                      .stream = as_u64(stream_expr),                                         \
                                      .api = api_of(EntryPoint::sym)},                                       \
                                     rc,                                                                     \
                                     format::occupies_device_memory(MemoryKind::memory_kind)                 \
                                         ? free_device_memory(device)                                        \
                                         : kUnknownFreeBytes);                                               \
            }                                                                                                \
        }                                                                                                    \
        return rc;                                                                                           \
    }

// The object leaves the live set before the real call: once the memory is back with CUDA another
// thread may be handed the same address and record it, and a late removal would then take out the
// new object. A free that fails puts the object back.
#define GPULEAK_FREE(lib, sym, base, since, streams, space, params, args, ptr, stream)                       \
    GPULEAK_EXPORT_HOOK(lib, sym, params)                                                                    \
    extern "C" ResultOf<Library::lib> gpuleak_hook_##sym params {                                            \
        const bool record = !HookScope::nested() && as_u64(ptr) != 0;                                        \
        const PendingFree pending = record ? begin_free(KeySpace::space, as_u64(ptr)) : PendingFree{};       \
        GPULEAK_CALL_REAL_(lib, sym, args)                                                                   \
        if (record) {                                                                                        \
            end_free(pending, rc == kSuccessOf<Library::lib>, as_u64(stream), api_of(EntryPoint::sym));      \
            if (rc == kSuccessOf<Library::lib> && pending.found &&                                           \
                format::occupies_device_memory(static_cast<MemoryKind>(pending.entry.kind))) {               \
                sample_device_memory(pending.entry.device);                                                  \
            }                                                                                                \
        }                                                                                                    \
        return rc;                                                                                           \
    }

#define GPULEAK_FREE_RANGE(lib, sym, base, since, streams, space, params, args, ptr, size)                   \
    GPULEAK_EXPORT_HOOK(lib, sym, params)                                                                    \
    extern "C" ResultOf<Library::lib> gpuleak_hook_##sym params {                                            \
        GPULEAK_CALL_REAL_(lib, sym, args)                                                                   \
        if (scope.outermost() && rc == kSuccessOf<Library::lib>) {                                           \
            record_free_range(KeySpace::space, as_u64(ptr), as_u64(size), api_of(EntryPoint::sym));          \
        }                                                                                                    \
        return rc;                                                                                           \
    }

#define GPULEAK_TRIM(lib, sym, base, since, streams, params, args, pool, keep)                               \
    GPULEAK_EXPORT_HOOK(lib, sym, params)                                                                    \
    extern "C" ResultOf<Library::lib> gpuleak_hook_##sym params {                                            \
        GPULEAK_CALL_REAL_(lib, sym, args)                                                                   \
        if (scope.outermost() && rc == kSuccessOf<Library::lib>) {                                           \
            record_pool_trim(as_u64(pool), as_u64(keep), api_of(EntryPoint::sym));                           \
        }                                                                                                    \
        return rc;                                                                                           \
    }

// Recorded inside other hooks' calls too: the runtime makes a device's context within the call that first
// uses the device, whose stack names the program's line.
#define GPULEAK_CONTEXT(lib, sym, base, since, streams, params, args, device_expr)                           \
    GPULEAK_EXPORT_HOOK(lib, sym, params)                                                                    \
    extern "C" ResultOf<Library::lib> gpuleak_hook_##sym params {                                            \
        GPULEAK_CALL_REAL_(lib, sym, args)                                                                   \
        if (rc == kSuccessOf<Library::lib>) {                                                                \
            record_context((device_expr), device_uuid(device_expr), api_of(EntryPoint::sym));                \
        }                                                                                                    \
        return rc;                                                                                           \
    }

#include "gpuleak/cuda_entry_points.def"
#undef GPULEAK_CALL_REAL_

} // namespace gpuleak
