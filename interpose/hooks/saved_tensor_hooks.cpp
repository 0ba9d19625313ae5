#include "hooks/saved_tensor_hooks.h"

#include <atomic>
#include <dlfcn.h>

#include "hooks/real_functions.h"

namespace gpuleak {

namespace {

// at::SavedTensorDefaultHooks::push_hooks(c10::SafePyObject, c10::SafePyObject), which
// saved_tensors_hooks.__enter__ calls, and torch::autograd::SavedVariable::register_hooks(
// std::unique_ptr<SavedVariableHooks>&&), which a saved tensor's register_hooks calls; both defined in
// libtorch_cpu.so, called from libtorch_python.so through its PLT, where libgpuleak's definitions come
// first.
#define GPULEAK_PUSH_HOOKS "_ZN2at23SavedTensorDefaultHooks10push_hooksEN3c1012SafePyObjectES2_"
#define GPULEAK_REGISTER_HOOKS                                                                               \
    "_ZN5torch8autograd13SavedVariable14register_hooksEOSt10unique_ptrINS0_"                                 \
    "18SavedVariableHooksESt14default_"                                                                      \
    "deleteIS3_EE"

std::atomic<bool> g_hooks_set{false};

// The function of libtorch_cpu.so, which Python's import loads without adding it to the global scope.
void* real_torch_function(const char* name) {
    if (void* next = real_dlsym(RTLD_NEXT, name))
        return next;
    void* torch = dlopen("libtorch_cpu.so", RTLD_NOLOAD | RTLD_LAZY);
    if (torch == nullptr)
        return nullptr;
    void* function = real_dlsym(torch, name);
    dlclose(torch);
    return function;
}

} // namespace

SavedTensorHooks saved_tensor_hooks() {
    if (g_hooks_set.load(std::memory_order_acquire))
        return SavedTensorHooks::Set;
    if (real_torch_function(GPULEAK_PUSH_HOOKS) == nullptr ||
        real_torch_function(GPULEAK_REGISTER_HOOKS) == nullptr)
        return SavedTensorHooks::Unknown;
    return SavedTensorHooks::NeverSet;
}

} // namespace gpuleak

// The parameters are what the C++ ABI passes: a SafePyObject by value is the address of the caller's
// copy, which the caller destroys; the member function's object comes first. They go on unchanged. The
// flag is set first: a function that throws (hooks disabled) still counts as a try.
extern "C" __attribute__((visibility("default"))) void
gpuleak_push_hooks(void* pack_hook, void* unpack_hook) __asm__(GPULEAK_PUSH_HOOKS);
extern "C" __attribute__((visibility("default"))) void
gpuleak_register_hooks(void* saved_variable, void* hooks) __asm__(GPULEAK_REGISTER_HOOKS);

void gpuleak_push_hooks(void* pack_hook, void* unpack_hook) {
    gpuleak::g_hooks_set.store(true, std::memory_order_release);
    static void* const real = gpuleak::real_torch_function(GPULEAK_PUSH_HOOKS);
    if (real != nullptr) // never null where libtorch_python.so calls it: libtorch_cpu.so defines it
        reinterpret_cast<void (*)(void*, void*)>(real)(pack_hook, unpack_hook);
}

void gpuleak_register_hooks(void* saved_variable, void* hooks) {
    gpuleak::g_hooks_set.store(true, std::memory_order_release);
    static void* const real = gpuleak::real_torch_function(GPULEAK_REGISTER_HOOKS);
    if (real != nullptr)
        reinterpret_cast<void (*)(void*, void*)>(real)(saved_variable, hooks);
}
