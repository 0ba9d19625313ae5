// Page-locked host memory: allocated (cuMemAllocHost, cuMemHostAlloc) or registered (cuMemHostRegister).
// It lives in host RAM on a real machine too, so none of it is charged to a device.
#include "device_state.h"
#include "driver_api.h"
#include "host_backing.h"

#include <cstdint>
#include <iterator>
#include <map>
#include <mutex>
#include <unordered_map>

using namespace gpuleak::sim;

namespace {

// CU_MEMHOSTALLOC_PORTABLE | DEVICEMAP | WRITECOMBINED
constexpr unsigned int kHostAllocFlags = 0x7;
// CU_MEMHOSTREGISTER_PORTABLE | DEVICEMAP | IOMEMORY | READ_ONLY
constexpr unsigned int kHostRegisterFlags = 0xF;

std::mutex g_mutex;
std::unordered_map<void*, std::size_t> g_pinned;
// Start address -> length; ordered to find overlapping registrations.
std::map<std::uintptr_t, std::size_t> g_registered;

CUresult allocate_pinned(void** pp, std::size_t bytesize) {
    int device = 0;
    if (const CUresult result = current_device(device); result != CUDA_SUCCESS) {
        return result;
    }
    if (pp == nullptr || bytesize == 0) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    void* memory = allocate_backing(bytesize);
    if (memory == nullptr) {
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    {
        const std::lock_guard lock(g_mutex);
        g_pinned.emplace(memory, bytesize);
    }
    *pp = memory;
    return CUDA_SUCCESS;
}

bool overlaps_registration(std::uintptr_t start, std::size_t length) {
    auto next = g_registered.lower_bound(start);
    if (next != g_registered.end() && next->first < start + length) {
        return true;
    }
    if (next == g_registered.begin()) {
        return false;
    }
    const auto previous = std::prev(next);
    return previous->first + previous->second > start;
}

} // namespace

extern "C" {

CUresult cuMemAllocHost_v2(void** pp, size_t bytesize) {
    return allocate_pinned(pp, bytesize);
}

CUresult cuMemHostAlloc(void** pp, size_t bytesize, unsigned int Flags) {
    if ((Flags & ~kHostAllocFlags) != 0) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    return allocate_pinned(pp, bytesize);
}

CUresult cuMemFreeHost(void* p) {
    if (!devices_initialized()) {
        return CUDA_ERROR_NOT_INITIALIZED;
    }
    std::size_t size = 0;
    {
        const std::lock_guard lock(g_mutex);
        const auto found = g_pinned.find(p);
        if (found == g_pinned.end()) {
            return CUDA_ERROR_INVALID_VALUE;
        }
        size = found->second;
        g_pinned.erase(found);
    }
    release_backing(p, size);
    return CUDA_SUCCESS;
}

CUresult cuMemHostRegister_v2(void* p, size_t bytesize, unsigned int Flags) {
    int device = 0;
    if (const CUresult result = current_device(device); result != CUDA_SUCCESS) {
        return result;
    }
    const auto start = reinterpret_cast<std::uintptr_t>(p);
    if (p == nullptr || bytesize == 0 || (Flags & ~kHostRegisterFlags) != 0 || start + bytesize < start) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    const std::lock_guard lock(g_mutex);
    if (overlaps_registration(start, bytesize)) {
        return CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED;
    }
    g_registered.emplace(start, bytesize);
    return CUDA_SUCCESS;
}

CUresult cuMemHostUnregister(void* p) {
    if (!devices_initialized()) {
        return CUDA_ERROR_NOT_INITIALIZED;
    }
    const std::lock_guard lock(g_mutex);
    return g_registered.erase(reinterpret_cast<std::uintptr_t>(p)) == 0
               ? CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED
               : CUDA_SUCCESS;
}

} // extern "C"
