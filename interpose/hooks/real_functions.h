// Finding the functions the hooks stand in for. Everything here is lock-free (beyond the dynamic
// loader's own lock), allocates nothing of its own and works before libgpuleak's constructors ran.
#pragma once

#include <atomic>
#include <optional>

#include "hooks/entry_points.h"

namespace gpuleak {

// glibc's dlsym: our exported dlsym interposes it, so it is found with dlvsym. RTLD_NEXT lookups
// through it search the objects after libgpuleak.
void* real_dlsym(void* handle, const char* name);

// The real function of `row`, resolved on first use; nullptr while no loaded library provides it.
void* real_function(EntryPoint row);

template <class Function> Function real_function_as(EntryPoint row) {
    return reinterpret_cast<Function>(real_function(row));
}

// The real function of `row` if it is already known, without trying to resolve it.
void* known_real_function(EntryPoint row);

// Makes `function` (what a lookup in the CUDA libraries returned) the real function of `row`, unless
// the row has one already or `function` is one of our own hooks.
void bind_real(EntryPoint row, void* function);

// `symbol` as defined by the objects after libgpuleak, else by the loaded runtime or driver library
// itself (found that way when it was loaded with RTLD_LOCAL); nullptr when neither defines it.
void* resolve_real_symbol(Library library, const char* symbol);

// The already loaded runtime or driver library (libcudart.so.13, else libcudart.so.12; libcuda.so.1),
// nullptr when it is not loaded. Never loads it.
void* loaded_library(Library library);

// The CUDA library whose file holds `address`, judged by the file name (libcudart.so*, libcuda.so*).
std::optional<Library> cuda_library_holding(const void* address);

// What a hook returns when its real function cannot be found: what that library says when the driver
// is missing.
template <Library L>
inline constexpr ResultOf<L> kMissingFunctionError =
    L == Library::RUNTIME ? cudaErrorInsufficientDriver : CUDA_ERROR_NOT_INITIALIZED;

} // namespace gpuleak

// The real dlsym for dlsym_trampoline.S, which jumps to it for RTLD_NEXT and RTLD_DEFAULT;
// gpuleak_resolve_real_dlsym fills it in and returns it (nullptr if glibc has no dlsym to find).
extern "C" {
__attribute__((visibility("hidden"))) extern std::atomic<void*> gpuleak_real_dlsym;
__attribute__((visibility("hidden"))) void* gpuleak_resolve_real_dlsym();
}
