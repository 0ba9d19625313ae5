// dlsym lookups on a library handle: programs that dlopen the CUDA libraries and look the allocation
// functions up themselves (XLA, PyTorch before 2.8, the runtime finding the driver) get the hooks.
//
// The exported dlsym is dlsym_trampoline.S: glibc's dlsym reads its own return address to decide what
// RTLD_NEXT and RTLD_DEFAULT search, so those go straight to the real dlsym with the program's return
// address in place. Lookups on a handle do not depend on the caller and come here.
//
// This runs inside every dlsym of the process, early and from any thread: it calls only the real
// dlsym and dladdr, takes no lock of its own, allocates nothing and never reaches dlsym again.
#include <dlfcn.h>

#include "hooks/entry_points.h"
#include "hooks/real_functions.h"

extern "C" __attribute__((visibility("hidden"))) void* gpuleak_dlsym_hook(void* handle, const char* name) {
    using namespace gpuleak;
    // The real lookup first, so that its result and dlerror() state are exactly what the program gets.
    void* const found = real_dlsym(handle, name);
    if (found == nullptr) {
        return found;
    }
    const auto row = entry_point_by_symbol(name);
    if (!row) {
        return found;
    }
    // A definition from elsewhere (another interposer, our own hooks) is not the function we wrap.
    const EntryPointInfo& info = entry_point_info(*row);
    if (cuda_library_holding(found) != info.library) {
        return found;
    }
    bind_real(*row, found);
    return info.wrapper;
}

#if !defined(__x86_64__)
// Without the trampoline glibc takes libgpuleak for the caller: RTLD_NEXT then searches the objects
// after libgpuleak instead of those after the real caller (an interposer that loads after libgpuleak
// can find itself and recurse), and RTLD_DEFAULT uses libgpuleak's scope instead of the caller's (a
// library loaded with RTLD_LOCAL no longer finds its own dependencies). Port the trampoline before
// relying on such a build.
extern "C" __attribute__((visibility("default"))) void* dlsym(void* handle, const char* name) noexcept {
    if (handle == RTLD_NEXT || handle == RTLD_DEFAULT) {
        return gpuleak::real_dlsym(handle, name);
    }
    return gpuleak_dlsym_hook(handle, name);
}
#endif
