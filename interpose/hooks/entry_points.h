// How the hooks find a row of the entry-point table: by exported symbol, by a proc-address lookup, by
// the hook's own address. The hooks' declarations, generated from cuda_entry_points.def.
#pragma once

#include <cstdint>
#include <optional>

#include "gpuleak/cuda_entry_points.h"

namespace gpuleak {

struct EntryPointInfo {
    const char* symbol;
    const char* base; // the name proc-address lookups are asked for
    Library library;
    int since; // the CUDA version from which a lookup of `base` hands out `symbol`
    StreamMode streams;
    Action action;
    void* wrapper; // the hook's address: what lookups hand out instead of the real function
};

// The hooks. Their exported names (the rows' symbols) are aliases defined next to the bodies; the
// table refers to these hidden names so that its wrapper addresses are always libgpuleak's own, even
// where the exported name would bind to another object's definition.
extern "C" {
#define GPULEAK_DECLARE_HOOK_(lib, sym, params)                                                              \
    __attribute__((visibility("hidden"))) ResultOf<Library::lib> gpuleak_hook_##sym params;
#define GPULEAK_ALLOC(lib, sym, base, since, streams, kind, params, ...)                                     \
    GPULEAK_DECLARE_HOOK_(lib, sym, params)
#define GPULEAK_FREE(lib, sym, base, since, streams, space, params, ...)                                     \
    GPULEAK_DECLARE_HOOK_(lib, sym, params)
#define GPULEAK_FREE_RANGE(lib, sym, base, since, streams, space, params, ...)                               \
    GPULEAK_DECLARE_HOOK_(lib, sym, params)
#define GPULEAK_TRIM(lib, sym, base, since, streams, params, ...) GPULEAK_DECLARE_HOOK_(lib, sym, params)
#define GPULEAK_LOOKUP(lib, sym, base, since, streams, params, args) GPULEAK_DECLARE_HOOK_(lib, sym, params)
#define GPULEAK_CONTEXT(lib, sym, base, since, streams, params, ...) GPULEAK_DECLARE_HOOK_(lib, sym, params)
#include "gpuleak/cuda_entry_points.def"
#undef GPULEAK_DECLARE_HOOK_
}

// Exports `sym` as another name of gpuleak_hook_<sym>, which must be defined in the same file. The
// symbol carries no version: a preloaded unversioned definition satisfies the program's versioned
// references (cudaMalloc@libcudart.so.13), a named version node would not.
#define GPULEAK_EXPORT_HOOK(lib, sym, params)                                                                \
    extern "C" __attribute__((visibility("default"),                                                         \
                              alias("gpuleak_hook_" #sym))) ::gpuleak::ResultOf<::gpuleak::Library::lib>     \
        sym params;

const EntryPointInfo& entry_point_info(EntryPoint row);

// The row whose exported symbol is `symbol` exactly.
std::optional<EntryPoint> entry_point_by_symbol(const char* symbol);

// The driver row a proc-address lookup of `base` at CUDA `version` hands out: among rows with that
// base and since <= version, the per-thread-stream variant when `flags` asks for the per-thread
// default stream (CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM), else the legacy-stream one (rows
// without a stream serve both); the highest since wins. Only driver rows: proc-address lookups hand out
// driver functions alone.
std::optional<EntryPoint> entry_point_by_base(const char* base, int version, uint64_t flags);

// The row whose hook is at `function`: a pointer that already is a wrapper must not be wrapped again.
std::optional<EntryPoint> entry_point_by_wrapper(const void* function);

} // namespace gpuleak
