// Page-locked host memory: allocated (cuMemAllocHost, cuMemHostAlloc) or registered (cuMemHostRegister).
// It lives in host RAM on a real machine too, so none of it is charged to a device.
#include "device_state.h"
#include "driver_api.h"
#include "host_backing.h"
#include "pointer_ranges.h"

#include <cstdint>
#include <iterator>
#include <map>
#include <mutex>

using namespace gpuleak::sim;

namespace {

// CU_MEMHOSTALLOC_PORTABLE | DEVICEMAP | WRITECOMBINED
constexpr unsigned int kHostAllocFlags = 0x7;
// CU_MEMHOSTREGISTER_PORTABLE | DEVICEMAP | IOMEMORY | READ_ONLY
constexpr unsigned int kHostRegisterFlags = 0xF;

struct PageLocked {
    std::size_t size;
    // The device current when it was allocated or registered, which pointer queries name.
    int device;
    unsigned long long buffer_id;
};

std::mutex g_mutex;
// By start address, ordered to find the range an address falls in, and overlapping registrations.
std::map<std::uintptr_t, PageLocked> g_pinned;
std::map<std::uintptr_t, PageLocked> g_registered;

std::optional<PointerRange> range_containing(const std::map<std::uintptr_t, PageLocked>& ranges,
                                             std::uintptr_t address) {
    const auto found = range_holding(ranges, address, [](const PageLocked& range) { return range.size; });
    if (found == ranges.end()) {
        return std::nullopt;
    }
    const auto& [start, range] = *found;
    return PointerRange{start,        range.size, start,          range.size, MemoryKind::HOST,
                        range.device, nullptr,    range.buffer_id};
}

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
        g_pinned.emplace(reinterpret_cast<std::uintptr_t>(memory),
                         PageLocked{bytesize, device, next_buffer_id()});
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
    return previous->first + previous->second.size > start;
}

} // namespace

std::optional<PointerRange> gpuleak::sim::page_locked_memory_containing(CUdeviceptr address) {
    const std::lock_guard lock(g_mutex);
    if (auto pinned = range_containing(g_pinned, address)) {
        return pinned;
    }
    return range_containing(g_registered, address);
}

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
        const auto found = g_pinned.find(reinterpret_cast<std::uintptr_t>(p));
        if (found == g_pinned.end()) {
            return CUDA_ERROR_INVALID_VALUE;
        }
        size = found->second.size;
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
    g_registered.emplace(start, PageLocked{bytesize, device, next_buffer_id()});
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
