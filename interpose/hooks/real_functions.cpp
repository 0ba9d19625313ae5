#include "hooks/real_functions.h"

#include <dlfcn.h>

#include <cstring>
#include <span>

// The trampoline reads this slot with a plain load.
static_assert(std::atomic<void*>::is_always_lock_free && sizeof(std::atomic<void*>) == sizeof(void*));

constinit std::atomic<void*> gpuleak_real_dlsym{nullptr};

void* gpuleak_resolve_real_dlsym() {
    // GLIBC_2.34 is where dlsym moved into libc; older glibc only has the libdl version.
    void* found = dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.34");
    if (found == nullptr) {
        found = dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.2.5");
    }
    gpuleak_real_dlsym.store(found, std::memory_order_release);
    return found;
}

namespace gpuleak {
namespace {

using DlsymFunction = void* (*)(void*, const char*);

// Zero-initialised before any code runs: usable by hooks called ahead of our constructors.
constinit std::atomic<void*> real_slots[kEntryPointCount]{};
constinit std::atomic<void*> library_handles[2]{};

// Programs are linked against CUDA 13's runtime or CUDA 12's. The first of them found loaded is the one
// used from then on (loaded_library keeps it), the newer where both are loaded by then.
constexpr const char* kRuntimeSonames[] = {"libcudart.so.13", "libcudart.so.12"};
constexpr const char* kDriverSonames[] = {"libcuda.so.1"};

std::span<const char* const> sonames_of(Library library) {
    if (library == Library::RUNTIME) {
        return kRuntimeSonames;
    }
    return kDriverSonames;
}

std::atomic<void*>& slot_of(EntryPoint row) {
    return real_slots[static_cast<std::size_t>(row)];
}

bool starts_with(const char* text, const char* prefix) {
    return std::strncmp(text, prefix, std::strlen(prefix)) == 0;
}

} // namespace

void* real_dlsym(void* handle, const char* name) {
    void* function = gpuleak_real_dlsym.load(std::memory_order_acquire);
    if (function == nullptr) {
        function = gpuleak_resolve_real_dlsym();
    }
    return function == nullptr ? nullptr : reinterpret_cast<DlsymFunction>(function)(handle, name);
}

void* loaded_library(Library library) {
    std::atomic<void*>& cached = library_handles[static_cast<std::size_t>(library)];
    void* handle = cached.load(std::memory_order_acquire);
    if (handle == nullptr) {
        // The reference this takes is kept: the slots may point into the library from now on. Two
        // threads racing here each keep one, which is harmless.
        for (const char* soname : sonames_of(library)) {
            handle = dlopen(soname, RTLD_NOLOAD | RTLD_LAZY);
            if (handle != nullptr) {
                cached.store(handle, std::memory_order_release);
                break;
            }
        }
    }
    return handle;
}

void* resolve_real_symbol(Library library, const char* symbol) {
    if (void* next = real_dlsym(RTLD_NEXT, symbol)) {
        return next;
    }
    void* handle = loaded_library(library);
    return handle == nullptr ? nullptr : real_dlsym(handle, symbol);
}

void* known_real_function(EntryPoint row) {
    return slot_of(row).load(std::memory_order_acquire);
}

void bind_real(EntryPoint row, void* function) {
    // A hook as its own real function would recurse forever; a library that hands out our hooks (one
    // that looks itself up with RTLD_DEFAULT) must not cause that.
    if (function == nullptr || entry_point_by_wrapper(function)) {
        return;
    }
    void* expected = nullptr;
    slot_of(row).compare_exchange_strong(expected, function, std::memory_order_acq_rel);
}

void* real_function(EntryPoint row) {
    if (void* known = known_real_function(row)) {
        return known;
    }
    const EntryPointInfo& info = entry_point_info(row);
    bind_real(row, resolve_real_symbol(info.library, info.symbol));
    return known_real_function(row);
}

std::optional<Library> cuda_library_holding(const void* address) {
    Dl_info info;
    if (dladdr(address, &info) == 0 || info.dli_fname == nullptr) {
        return std::nullopt;
    }
    const char* slash = std::strrchr(info.dli_fname, '/');
    const char* file = slash == nullptr ? info.dli_fname : slash + 1;
    if (starts_with(file, "libcudart.so")) {
        return Library::RUNTIME;
    }
    if (starts_with(file, "libcuda.so")) {
        return Library::DRIVER;
    }
    return std::nullopt;
}

} // namespace gpuleak
