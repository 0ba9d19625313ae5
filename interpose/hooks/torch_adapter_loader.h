// Loads gpuleak's PyTorch adapter (torch_adapter/) into a traced PyTorch program, without Python and
// without a change to the program: at the first allocation that PyTorch's caching allocator
// (libc10_cuda.so) makes through the hooks, that is after CUDA's lazy init, the adapter built for that
// exact libc10_cuda.so is looked up in the cache, dlopen'ed and attached to the allocator.
#pragma once

#include <atomic>

namespace gpuleak {

// True until the adapter is attached, or known to be unavailable or unwanted.
extern std::atomic<bool> g_torch_adapter_waiting;

inline bool torch_adapter_waiting() {
    return g_torch_adapter_waiting.load(std::memory_order_relaxed);
}

// Called by the allocation hooks, before the real call, with their return address: when that lies in
// libc10_cuda.so, attaches the adapter (once; a concurrent caller goes on without waiting for it).
void notice_allocation_caller(const void* return_address);

// gpuleak attach, in a program that may have loaded PyTorch and made its caching allocator long ago:
// attaches the adapter to the libc10_cuda.so loaded, if any, without waiting for an allocation of its.
void attach_to_loaded_torch();

} // namespace gpuleak
