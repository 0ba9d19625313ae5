// Linear device memory: cuMemAlloc and its pitched, managed and stream-ordered forms, charged against the
// device's capacity. Stream-ordered frees take effect at once: nothing on a simulated stream is pending.
#include "device_state.h"
#include "driver_api.h"
#include "host_backing.h"
#include "pointer_ranges.h"

#include <cstdint>
#include <cstring>
#include <limits>
#include <map>
#include <mutex>

using namespace gpuleak::sim;

namespace {

constexpr std::size_t kPitchAlignment = 512;
constexpr unsigned int kMemAttachGlobal = 1;
constexpr unsigned int kMemAttachHost = 2;

struct DeviceAllocation {
    std::size_t size;
    int device;
    MemoryKind kind;
    CUmemoryPool pool;
    unsigned long long buffer_id;
};

std::mutex g_mutex;
// Ordered by address, to find the allocation an interior pointer falls in.
std::map<CUdeviceptr, DeviceAllocation> g_allocations;
// Whether g_allocations is gone: the process is exiting, and the recorder (preloaded, so destroyed last)
// may still take a host sample. Set under g_mutex by the object destroyed before g_allocations.
bool g_allocations_destroyed = false;
struct AllocationsLifetime {
    AllocationsLifetime() = default;
    AllocationsLifetime(const AllocationsLifetime&) = delete;
    AllocationsLifetime& operator=(const AllocationsLifetime&) = delete;
    ~AllocationsLifetime() {
        const std::lock_guard lock(g_mutex);
        g_allocations_destroyed = true;
    }
} g_allocations_lifetime;

// Like a GPU, a failed allocation leaves *dptr untouched.
CUresult allocate(CUdeviceptr* dptr, std::size_t bytes, int device, MemoryKind kind = MemoryKind::DEVICE,
                  CUmemoryPool pool = nullptr) {
    if (dptr == nullptr || bytes == 0) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    if (!charge_device(device, bytes)) {
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    void* memory = allocate_backing(bytes);
    if (memory == nullptr) {
        uncharge_device(device, bytes);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    const auto address = reinterpret_cast<CUdeviceptr>(memory);
    {
        const std::lock_guard lock(g_mutex);
        g_allocations.emplace(address, DeviceAllocation{bytes, device, kind, pool, next_buffer_id()});
    }
    *dptr = address;
    return CUDA_SUCCESS;
}

CUresult release(CUdeviceptr dptr) {
    if (!devices_initialized()) {
        return CUDA_ERROR_NOT_INITIALIZED;
    }
    DeviceAllocation allocation{};
    {
        const std::lock_guard lock(g_mutex);
        const auto found = g_allocations.find(dptr);
        if (found == g_allocations.end()) {
            return CUDA_ERROR_INVALID_VALUE;
        }
        allocation = found->second;
        g_allocations.erase(found);
    }
    release_backing(reinterpret_cast<void*>(dptr), allocation.size);
    uncharge_device(allocation.device, allocation.size);
    return CUDA_SUCCESS;
}

CUresult allocate_on_current_device(CUdeviceptr* dptr, std::size_t bytes,
                                    MemoryKind kind = MemoryKind::DEVICE) {
    int device = 0;
    if (const CUresult result = current_device(device); result != CUDA_SUCCESS) {
        return result;
    }
    return allocate(dptr, bytes, device, kind);
}

CUresult allocate_async(CUdeviceptr* dptr, std::size_t bytes, CUstream stream) {
    int device = 0;
    if (const CUresult result = stream_device(stream, device); result != CUDA_SUCCESS) {
        return result;
    }
    return allocate(dptr, bytes, device, MemoryKind::DEVICE, default_pool(device));
}

CUresult allocate_from_pool_async(CUdeviceptr* dptr, std::size_t bytes, CUmemoryPool pool, CUstream stream) {
    int stream_owner = 0;
    if (const CUresult result = stream_device(stream, stream_owner); result != CUDA_SUCCESS) {
        return result;
    }
    const int device = pool_device(pool);
    if (device < 0) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    return allocate(dptr, bytes, device, MemoryKind::DEVICE, pool);
}

CUresult release_async(CUdeviceptr dptr, CUstream stream) {
    int device = 0;
    if (const CUresult result = stream_device(stream, device); result != CUDA_SUCCESS) {
        return result;
    }
    return release(dptr);
}

// A pool attribute's value: read as 0, or set, changing nothing, since the pool holds nothing back (frees
// take effect at once).
CUresult pool_attribute_call(CUmemoryPool pool, int attr, void* value, bool read) {
    if (!devices_initialized()) {
        return CUDA_ERROR_NOT_INITIALIZED;
    }
    constexpr int kFirstAttribute = 1;     // CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES
    constexpr int kFirstWideAttribute = 4; // CU_MEMPOOL_ATTR_RELEASE_THRESHOLD: it and those after are 64-bit
    constexpr int kLastAttribute = 8;      // CU_MEMPOOL_ATTR_USED_MEM_HIGH
    if (pool_device(pool) < 0 || value == nullptr || attr < kFirstAttribute || attr > kLastAttribute) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    if (read) {
        std::memset(value, 0, attr >= kFirstWideAttribute ? sizeof(cuuint64_t) : sizeof(int));
    }
    return CUDA_SUCCESS;
}

} // namespace

std::size_t gpuleak_sim_device_resident_bytes() {
    // Called from the recorder's sampling, perhaps in a signal handler that interrupted this very lock's
    // holder: never waits for it.
    const std::unique_lock lock(g_mutex, std::try_to_lock);
    if (!lock.owns_lock() || g_allocations_destroyed) {
        return SIZE_MAX;
    }
    std::size_t bytes = 0;
    for (const auto& [address, allocation] : g_allocations) {
        bytes += resident_backing_bytes(reinterpret_cast<const void*>(address), allocation.size);
    }
    return bytes;
}

std::optional<PointerRange> gpuleak::sim::device_allocation_containing(CUdeviceptr address) {
    const std::lock_guard lock(g_mutex);
    const auto found =
        range_holding(g_allocations, address, [](const DeviceAllocation& a) { return a.size; });
    if (found == g_allocations.end()) {
        return std::nullopt;
    }
    const auto& [base, allocation] = *found;
    return PointerRange{base,
                        allocation.size,
                        base,
                        allocation.size,
                        allocation.kind,
                        allocation.device,
                        allocation.pool,
                        allocation.buffer_id};
}

extern "C" {

CUresult cuMemAlloc_v2(CUdeviceptr* dptr, size_t bytesize) {
    return allocate_on_current_device(dptr, bytesize);
}

CUresult cuMemAllocPitch_v2(CUdeviceptr* dptr, size_t* pPitch, size_t WidthInBytes, size_t Height,
                            unsigned int ElementSizeBytes) {
    if (pPitch == nullptr || WidthInBytes == 0 || Height == 0 ||
        (ElementSizeBytes != 4 && ElementSizeBytes != 8 && ElementSizeBytes != 16) ||
        WidthInBytes > std::numeric_limits<size_t>::max() - kPitchAlignment) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    const size_t pitch = (WidthInBytes + kPitchAlignment - 1) / kPitchAlignment * kPitchAlignment;
    if (Height > std::numeric_limits<size_t>::max() / pitch) {
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    const CUresult result = allocate_on_current_device(dptr, pitch * Height);
    if (result == CUDA_SUCCESS) {
        *pPitch = pitch;
    }
    return result;
}

CUresult cuMemAllocManaged(CUdeviceptr* dptr, size_t bytesize, unsigned int flags) {
    if (flags != kMemAttachGlobal && flags != kMemAttachHost) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    return allocate_on_current_device(dptr, bytesize, MemoryKind::MANAGED);
}

CUresult cuMemFree_v2(CUdeviceptr dptr) {
    return release(dptr);
}

CUresult cuMemAllocAsync(CUdeviceptr* dptr, size_t bytesize, CUstream hStream) {
    return allocate_async(dptr, bytesize, hStream);
}

CUresult cuMemAllocAsync_ptsz(CUdeviceptr* dptr, size_t bytesize, CUstream hStream) {
    return allocate_async(dptr, bytesize, hStream);
}

CUresult cuMemAllocFromPoolAsync(CUdeviceptr* dptr, size_t bytesize, CUmemoryPool pool, CUstream hStream) {
    return allocate_from_pool_async(dptr, bytesize, pool, hStream);
}

CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr* dptr, size_t bytesize, CUmemoryPool pool,
                                      CUstream hStream) {
    return allocate_from_pool_async(dptr, bytesize, pool, hStream);
}

CUresult cuMemFreeAsync(CUdeviceptr dptr, CUstream hStream) {
    return release_async(dptr, hStream);
}

CUresult cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream hStream) {
    return release_async(dptr, hStream);
}

// Frees take effect at once, so a pool never holds memory it could give back.
CUresult cuMemPoolTrimTo(CUmemoryPool pool, size_t /*minBytesToKeep*/) {
    if (!devices_initialized()) {
        return CUDA_ERROR_NOT_INITIALIZED;
    }
    return pool_device(pool) < 0 ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
}

CUresult cuMemPoolGetAttribute(CUmemoryPool pool, int attr, void* value) {
    return pool_attribute_call(pool, attr, value, true);
}

CUresult cuMemPoolSetAttribute(CUmemoryPool pool, int attr, void* value) {
    return pool_attribute_call(pool, attr, value, false);
}

// Every device reaches every other's memory on the simulated device: access is granted already.
CUresult cuMemPoolSetAccess(CUmemoryPool pool, const CUmemAccessDesc* map, size_t count) {
    if (!devices_initialized()) {
        return CUDA_ERROR_NOT_INITIALIZED;
    }
    return pool_device(pool) < 0 || (map == nullptr && count > 0) ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
}

CUresult cuMemGetInfo_v2(size_t* free, size_t* total) {
    int device = 0;
    if (const CUresult result = current_device(device); result != CUDA_SUCCESS) {
        return result;
    }
    if (free == nullptr || total == nullptr) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    *total = device_capacity(device);
    *free = *total - device_charged(device);
    return CUDA_SUCCESS;
}

} // extern "C"
