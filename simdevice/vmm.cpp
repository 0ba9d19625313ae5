// Virtual memory management (cuMemCreate, cuMemAddressReserve, cuMemMap...), as PyTorch's expandable
// segments use it. A physical allocation is a memfd, a reservation is PROT_NONE address space, and a
// mapping puts the memfd's pages into a reservation, so that memory written through one mapping reads back
// through another exactly as on a GPU.
#include "device_state.h"
#include "driver_api.h"
#include "pointer_ranges.h"

#include <algorithm>
#include <cstdint>
#include <fcntl.h>
#include <map>
#include <mutex>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <unordered_map>

using namespace gpuleak::sim;

namespace {

constexpr std::size_t kGranularity = std::size_t{2} << 20;
// CU_MEM_ALLOC_GRANULARITY_MINIMUM and _RECOMMENDED
constexpr int kLastGranularityOption = 1;
// CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, the only shareable handle type simulated.
constexpr int kPosixFileDescriptor = 1;

struct Physical {
    int fd;
    std::size_t size;
    int device;
    int mappings;
    // Released handles stay charged until their last mapping goes, as the CUDA documentation specifies.
    bool released;
    // Handles handed out again by cuMemRetainAllocationHandle or cuMemImportFromShareableHandle: each
    // takes one cuMemRelease more before the handle is released.
    int retains;
    // What pointer queries name it by (CU_POINTER_ATTRIBUTE_MEMORY_BLOCK_ID).
    unsigned long long buffer_id;
};

struct Mapping {
    std::size_t size;
    CUmemGenericAllocationHandle handle;
};

std::mutex g_mutex;
CUmemGenericAllocationHandle g_next_handle = 1;
std::unordered_map<CUmemGenericAllocationHandle, Physical> g_physical;
// Start address -> length, ordered to find the reservation or mappings around an address.
std::map<CUdeviceptr, std::size_t> g_reservations;
std::map<CUdeviceptr, Mapping> g_mappings;

bool granular(std::size_t value) {
    return value % kGranularity == 0;
}

bool inside_one_reservation(CUdeviceptr start, std::size_t size) {
    auto after = g_reservations.upper_bound(start);
    if (after == g_reservations.begin()) {
        return false;
    }
    const auto& [base, length] = *std::prev(after);
    return start - base <= length && size <= length - (start - base);
}

bool overlaps_mapping(CUdeviceptr start, std::size_t size) {
    auto next = g_mappings.lower_bound(start);
    if (next != g_mappings.end() && next->first < start + size) {
        return true;
    }
    if (next == g_mappings.begin()) {
        return false;
    }
    const auto& [base, mapping] = *std::prev(next);
    return base + mapping.size > start;
}

// The mappings that exactly tile [start, start + size), in address order; end() when there is a gap or a
// mapping sticks out of either end.
std::map<CUdeviceptr, Mapping>::iterator first_of_exact_cover(CUdeviceptr start, std::size_t size) {
    const auto first = g_mappings.find(start);
    CUdeviceptr covered = start;
    for (auto it = first; it != g_mappings.end() && covered < start + size; ++it) {
        if (it->first != covered) {
            return g_mappings.end();
        }
        covered += it->second.size;
    }
    return covered == start + size ? first : g_mappings.end();
}

void drop_physical_if_unused(CUmemGenericAllocationHandle handle) {
    const auto found = g_physical.find(handle);
    if (found->second.released && found->second.mappings == 0) {
        uncharge_device(found->second.device, found->second.size);
        g_physical.erase(found);
    }
}

void* reserve_aligned(std::size_t size, std::size_t alignment, CUdeviceptr hint) {
    constexpr int kFlags = MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE;
    if (hint != 0 && hint % alignment == 0) {
        void* at = mmap(reinterpret_cast<void*>(hint), size, PROT_NONE, kFlags | MAP_FIXED_NOREPLACE, -1, 0);
        if (at == reinterpret_cast<void*>(hint)) {
            return at;
        }
        // Kernels before 4.17 take MAP_FIXED_NOREPLACE as a mere hint and may map elsewhere.
        if (at != MAP_FAILED) {
            munmap(at, size);
        }
    }
    // Over-reserve by the alignment and give back the unaligned head and the tail.
    void* raw = mmap(nullptr, size + alignment, PROT_NONE, kFlags, -1, 0);
    if (raw == MAP_FAILED) {
        return nullptr;
    }
    const auto base = reinterpret_cast<std::uintptr_t>(raw);
    const std::uintptr_t aligned = (base + alignment - 1) / alignment * alignment;
    if (aligned > base) {
        munmap(raw, aligned - base);
    }
    if (const std::size_t tail = base + alignment - aligned; tail > 0) {
        munmap(reinterpret_cast<void*>(aligned + size), tail);
    }
    return reinterpret_cast<void*>(aligned);
}

} // namespace

std::optional<Reservation> gpuleak::sim::reservation_containing(CUdeviceptr address) {
    const std::lock_guard lock(g_mutex);
    const auto found = range_holding(g_reservations, address, [](std::size_t size) { return size; });
    return found == g_reservations.end() ? std::nullopt
                                         : std::optional(Reservation{found->first, found->second});
}

std::optional<PointerRange> gpuleak::sim::mapping_containing(CUdeviceptr address) {
    const std::lock_guard lock(g_mutex);
    const auto mapping = range_holding(g_mappings, address, [](const Mapping& m) { return m.size; });
    if (mapping == g_mappings.end()) {
        return std::nullopt;
    }
    // A mapping lies inside one reservation, always: cuMemAddressFree refuses a mapped one.
    const auto reservation = range_holding(g_reservations, address, [](std::size_t size) { return size; });
    const Physical& physical = g_physical.at(mapping->second.handle);
    return PointerRange{reservation->first, reservation->second, mapping->first, mapping->second.size,
                        MemoryKind::DEVICE, physical.device,     nullptr,        physical.buffer_id};
}

extern "C" {

CUresult cuMemGetAllocationGranularity(size_t* granularity, const CUmemAllocationProp* prop, int option) {
    if (!devices_initialized()) {
        return CUDA_ERROR_NOT_INITIALIZED;
    }
    if (granularity == nullptr || prop == nullptr || option < 0 || option > kLastGranularityOption) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    *granularity = kGranularity;
    return CUDA_SUCCESS;
}

CUresult cuMemCreate(CUmemGenericAllocationHandle* handle, size_t size, const CUmemAllocationProp* prop,
                     unsigned long long flags) {
    if (!devices_initialized()) {
        return CUDA_ERROR_NOT_INITIALIZED;
    }
    if (handle == nullptr || prop == nullptr || flags != 0 || size == 0 || !granular(size) ||
        prop->type != CU_MEM_ALLOCATION_TYPE_PINNED || prop->location.type != CU_MEM_LOCATION_TYPE_DEVICE) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    const int device = prop->location.id;
    if (!valid_device(device)) {
        return CUDA_ERROR_INVALID_DEVICE;
    }
    if (!charge_device(device, size)) {
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    const int fd = memfd_create("gpuleak-sim-vmm", MFD_CLOEXEC);
    if (fd < 0 || ftruncate(fd, static_cast<off_t>(size)) != 0) {
        if (fd >= 0) {
            close(fd);
        }
        uncharge_device(device, size);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    const std::lock_guard lock(g_mutex);
    const CUmemGenericAllocationHandle created = g_next_handle++;
    g_physical.emplace(created, Physical{fd, size, device, 0, false, 0, next_buffer_id()});
    *handle = created;
    return CUDA_SUCCESS;
}

CUresult cuMemRelease(CUmemGenericAllocationHandle handle) {
    if (!devices_initialized()) {
        return CUDA_ERROR_NOT_INITIALIZED;
    }
    const std::lock_guard lock(g_mutex);
    const auto found = g_physical.find(handle);
    if (found == g_physical.end() || found->second.released) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    if (found->second.retains > 0) {
        --found->second.retains;
        return CUDA_SUCCESS;
    }
    // Existing mappings keep their own reference to the memfd's pages.
    close(found->second.fd);
    found->second.released = true;
    drop_physical_if_unused(handle);
    return CUDA_SUCCESS;
}

CUresult cuMemAddressReserve(CUdeviceptr* ptr, size_t size, size_t alignment, CUdeviceptr addr,
                             unsigned long long flags) {
    if (!devices_initialized()) {
        return CUDA_ERROR_NOT_INITIALIZED;
    }
    if (ptr == nullptr || size == 0 || !granular(size) || flags != 0 || (alignment & (alignment - 1)) != 0) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    void* reserved = reserve_aligned(size, std::max(alignment, kGranularity), addr);
    if (reserved == nullptr) {
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    const auto address = reinterpret_cast<CUdeviceptr>(reserved);
    {
        const std::lock_guard lock(g_mutex);
        g_reservations.emplace(address, size);
    }
    *ptr = address;
    return CUDA_SUCCESS;
}

// A reservation that still has mappings is refused rather than torn down under them.
CUresult cuMemAddressFree(CUdeviceptr ptr, size_t size) {
    if (!devices_initialized()) {
        return CUDA_ERROR_NOT_INITIALIZED;
    }
    const std::lock_guard lock(g_mutex);
    const auto found = g_reservations.find(ptr);
    if (found == g_reservations.end() || found->second != size || overlaps_mapping(ptr, size)) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    munmap(reinterpret_cast<void*>(ptr), size);
    g_reservations.erase(found);
    return CUDA_SUCCESS;
}

CUresult cuMemMap(CUdeviceptr ptr, size_t size, size_t offset, CUmemGenericAllocationHandle handle,
                  unsigned long long flags) {
    if (!devices_initialized()) {
        return CUDA_ERROR_NOT_INITIALIZED;
    }
    if (flags != 0 || size == 0 || !granular(ptr) || !granular(size) || !granular(offset)) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    const std::lock_guard lock(g_mutex);
    const auto found = g_physical.find(handle);
    if (found == g_physical.end() || found->second.released || offset > found->second.size ||
        size > found->second.size - offset || !inside_one_reservation(ptr, size) ||
        overlaps_mapping(ptr, size)) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    // Inaccessible until cuMemSetAccess, as on a GPU.
    if (mmap(reinterpret_cast<void*>(ptr), size, PROT_NONE, MAP_SHARED | MAP_FIXED, found->second.fd,
             static_cast<off_t>(offset)) == MAP_FAILED) {
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    ++found->second.mappings;
    g_mappings.emplace(ptr, Mapping{size, handle});
    return CUDA_SUCCESS;
}

CUresult cuMemSetAccess(CUdeviceptr ptr, size_t size, const CUmemAccessDesc* desc, size_t count) {
    if (!devices_initialized()) {
        return CUDA_ERROR_NOT_INITIALIZED;
    }
    if (desc == nullptr || count == 0 || size == 0) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    // Every simulated device sees the same host pages, so the widest access asked for applies to all.
    int access = CU_MEM_ACCESS_FLAGS_PROT_NONE;
    for (size_t i = 0; i < count; ++i) {
        if (desc[i].location.type != CU_MEM_LOCATION_TYPE_DEVICE) {
            return CUDA_ERROR_INVALID_VALUE;
        }
        if (!valid_device(desc[i].location.id)) {
            return CUDA_ERROR_INVALID_DEVICE;
        }
        if (desc[i].flags != CU_MEM_ACCESS_FLAGS_PROT_NONE &&
            desc[i].flags != CU_MEM_ACCESS_FLAGS_PROT_READ &&
            desc[i].flags != CU_MEM_ACCESS_FLAGS_PROT_READWRITE) {
            return CUDA_ERROR_INVALID_VALUE;
        }
        access = std::max(access, desc[i].flags);
    }
    const std::lock_guard lock(g_mutex);
    if (first_of_exact_cover(ptr, size) == g_mappings.end()) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    const int protection = access == CU_MEM_ACCESS_FLAGS_PROT_READWRITE ? PROT_READ | PROT_WRITE
                           : access == CU_MEM_ACCESS_FLAGS_PROT_READ    ? PROT_READ
                                                                        : PROT_NONE;
    return mprotect(reinterpret_cast<void*>(ptr), size, protection) == 0 ? CUDA_SUCCESS
                                                                         : CUDA_ERROR_INVALID_VALUE;
}

CUresult cuMemUnmap(CUdeviceptr ptr, size_t size) {
    if (!devices_initialized()) {
        return CUDA_ERROR_NOT_INITIALIZED;
    }
    if (size == 0) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    const std::lock_guard lock(g_mutex);
    auto it = first_of_exact_cover(ptr, size);
    if (it == g_mappings.end()) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    // Back to inaccessible reserved address space, still owned by the reservation.
    mmap(reinterpret_cast<void*>(ptr), size, PROT_NONE,
         MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0);
    while (it != g_mappings.end() && it->first < ptr + size) {
        const CUmemGenericAllocationHandle handle = it->second.handle;
        it = g_mappings.erase(it);
        --g_physical.at(handle).mappings;
        drop_physical_if_unused(handle);
    }
    return CUDA_SUCCESS;
}

// Sharing a physical allocation as a file descriptor (CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR), as
// PyTorch does to pass expandable segments between processes: the descriptor is the memfd itself.
CUresult cuMemExportToShareableHandle(void* shareableHandle, CUmemGenericAllocationHandle handle,
                                      int handleType, unsigned long long flags) {
    if (!devices_initialized()) {
        return CUDA_ERROR_NOT_INITIALIZED;
    }
    if (shareableHandle == nullptr || flags != 0) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    if (handleType != kPosixFileDescriptor) {
        return CUDA_ERROR_NOT_SUPPORTED;
    }
    const std::lock_guard lock(g_mutex);
    const auto found = g_physical.find(handle);
    if (found == g_physical.end() || found->second.released) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    const int fd = fcntl(found->second.fd, F_DUPFD_CLOEXEC, 0);
    if (fd < 0) {
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    *static_cast<int*>(shareableHandle) = fd;
    return CUDA_SUCCESS;
}

// Only descriptors of this process's own allocations can be imported (another process's memory would
// need a device both processes share, which the simulator does not have): they yield the exporting
// handle again, retained once more.
CUresult cuMemImportFromShareableHandle(CUmemGenericAllocationHandle* handle, void* osHandle,
                                        int shHandleType) {
    if (!devices_initialized()) {
        return CUDA_ERROR_NOT_INITIALIZED;
    }
    if (handle == nullptr) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    if (shHandleType != kPosixFileDescriptor) {
        return CUDA_ERROR_NOT_SUPPORTED;
    }
    // The descriptor travels in the pointer's bits, as the CUDA documentation specifies.
    const int fd = static_cast<int>(reinterpret_cast<std::intptr_t>(osHandle));
    struct stat imported {};
    if (fstat(fd, &imported) != 0) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    const std::lock_guard lock(g_mutex);
    for (auto& [existing, physical] : g_physical) {
        struct stat own {};
        if (!physical.released && fstat(physical.fd, &own) == 0 && own.st_dev == imported.st_dev &&
            own.st_ino == imported.st_ino) {
            ++physical.retains;
            *handle = existing;
            return CUDA_SUCCESS;
        }
    }
    return CUDA_ERROR_NOT_SUPPORTED;
}

// The handle of the allocation mapped at `addr`, retained once more.
CUresult cuMemRetainAllocationHandle(CUmemGenericAllocationHandle* handle, void* addr) {
    if (!devices_initialized()) {
        return CUDA_ERROR_NOT_INITIALIZED;
    }
    if (handle == nullptr) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    const auto address = reinterpret_cast<CUdeviceptr>(addr);
    const std::lock_guard lock(g_mutex);
    const auto mapping = range_holding(g_mappings, address, [](const Mapping& m) { return m.size; });
    if (mapping == g_mappings.end()) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    auto physical = g_physical.find(mapping->second.handle);
    if (physical == g_physical.end() || physical->second.released) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    ++physical->second.retains;
    *handle = mapping->second.handle;
    return CUDA_SUCCESS;
}

CUresult cuMemGetAllocationPropertiesFromHandle(CUmemAllocationProp* prop,
                                                CUmemGenericAllocationHandle handle) {
    if (!devices_initialized()) {
        return CUDA_ERROR_NOT_INITIALIZED;
    }
    if (prop == nullptr) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    const std::lock_guard lock(g_mutex);
    const auto found = g_physical.find(handle);
    if (found == g_physical.end() || found->second.released) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    *prop = CUmemAllocationProp{};
    prop->type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop->requestedHandleTypes = kPosixFileDescriptor;
    prop->location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop->location.id = found->second.device;
    return CUDA_SUCCESS;
}

} // extern "C"
