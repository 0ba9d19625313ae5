// Pointer queries: which memory an address lies in, as XLA and PyTorch ask before copying or sharing it.
// Every address the driver handed out (device, managed, page-locked and mapped memory) is known by the
// file that keeps it (pointer_ranges.h); any other address is plain host memory the driver never saw.
#include "device_state.h"
#include "driver_api.h"
#include "pointer_ranges.h"

#include <atomic>
#include <cstdint>
#include <optional>

using namespace gpuleak::sim;

namespace {

// The ordinal the runtime reports for memory no device knows (cudaPointerGetAttributes).
constexpr int kNoDevice = -2;

std::atomic<unsigned long long> g_last_buffer_id{0};

std::optional<PointerRange> range_containing(CUdeviceptr address) {
    if (auto allocation = device_allocation_containing(address)) {
        return allocation;
    }
    if (auto mapping = mapping_containing(address)) {
        return mapping;
    }
    return page_locked_memory_containing(address);
}

template <typename Value> void store(void* data, Value value) {
    *static_cast<Value*>(data) = value;
}

// The value of `attribute` for `address` in `range`, written as the type the CUDA documentation gives it.
// An attribute that has no value for this memory (the host address of device memory) is INVALID_VALUE.
CUresult describe(void* data, int attribute, CUdeviceptr address, const PointerRange& range) {
    const bool device_only = range.kind == MemoryKind::DEVICE;
    switch (attribute) {
    case CU_POINTER_ATTRIBUTE_CONTEXT:
        store(data, primary_context(range.device));
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_MEMORY_TYPE:
        store(data, range.kind == MemoryKind::HOST ? CU_MEMORYTYPE_HOST : CU_MEMORYTYPE_DEVICE);
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_DEVICE_POINTER:
        store(data, address);
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_HOST_POINTER:
        if (device_only) {
            return CUDA_ERROR_INVALID_VALUE;
        }
        store(data, reinterpret_cast<void*>(address));
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_SYNC_MEMOPS:
        store(data, 0U);
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_BUFFER_ID:
    case CU_POINTER_ATTRIBUTE_MEMORY_BLOCK_ID:
        store(data, range.buffer_id);
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_IS_MANAGED:
        store(data, range.kind == MemoryKind::MANAGED ? 1U : 0U);
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL:
        store(data, range.device);
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE:
        store(data, device_only && range.pool == nullptr ? 1U : 0U);
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR:
        store(data, range.base);
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_RANGE_SIZE:
        store(data, range.size);
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_MAPPING_BASE_ADDR:
        store(data, range.mapping_base);
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_MAPPING_SIZE:
        store(data, range.mapping_size);
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_MAPPED:
        store(data, 1U);
        return CUDA_SUCCESS;
    // No handle to share it by, no GPUDirect RDMA and no decompression engine on the simulated device.
    case CU_POINTER_ATTRIBUTE_ALLOWED_HANDLE_TYPES:
    case CU_POINTER_ATTRIBUTE_IS_GPU_DIRECT_RDMA_CAPABLE:
    case CU_POINTER_ATTRIBUTE_IS_HW_DECOMPRESS_CAPABLE:
        store(data, 0U);
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_ACCESS_FLAGS:
        store(data, CU_POINTER_ATTRIBUTE_ACCESS_FLAG_READWRITE);
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE:
        store(data, range.pool);
        return CUDA_SUCCESS;
    default:
        return CUDA_ERROR_INVALID_VALUE;
    }
}

// What cuPointerGetAttributes answers for an address the driver never handed out: the documented "NULL
// values", and the runtime's ordinal for unregistered memory.
CUresult describe_unknown(void* data, int attribute) {
    switch (attribute) {
    case CU_POINTER_ATTRIBUTE_CONTEXT:
    case CU_POINTER_ATTRIBUTE_HOST_POINTER:
    case CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE:
        store(data, static_cast<void*>(nullptr));
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_MEMORY_TYPE:
    case CU_POINTER_ATTRIBUTE_SYNC_MEMOPS:
    case CU_POINTER_ATTRIBUTE_IS_MANAGED:
    case CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE:
    case CU_POINTER_ATTRIBUTE_MAPPED:
    case CU_POINTER_ATTRIBUTE_ALLOWED_HANDLE_TYPES:
    case CU_POINTER_ATTRIBUTE_IS_GPU_DIRECT_RDMA_CAPABLE:
    case CU_POINTER_ATTRIBUTE_ACCESS_FLAGS:
    case CU_POINTER_ATTRIBUTE_IS_HW_DECOMPRESS_CAPABLE:
        store(data, 0U);
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_DEVICE_POINTER:
    case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR:
    case CU_POINTER_ATTRIBUTE_MAPPING_BASE_ADDR:
        store(data, CUdeviceptr{0});
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_BUFFER_ID:
    case CU_POINTER_ATTRIBUTE_MEMORY_BLOCK_ID:
        store(data, 0ULL);
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_RANGE_SIZE:
    case CU_POINTER_ATTRIBUTE_MAPPING_SIZE:
        store(data, std::size_t{0});
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL:
        store(data, kNoDevice);
        return CUDA_SUCCESS;
    default:
        return CUDA_ERROR_INVALID_VALUE;
    }
}

// An address reserved but not mapped: only where it lies, and that nothing backs it.
CUresult describe_unmapped(void* data, int attribute, const Reservation& reservation) {
    switch (attribute) {
    case CU_POINTER_ATTRIBUTE_MAPPED:
        store(data, 0U);
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR:
        store(data, reservation.base);
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_RANGE_SIZE:
        store(data, reservation.size);
        return CUDA_SUCCESS;
    default:
        return CUDA_ERROR_INVALID_VALUE;
    }
}

} // namespace

unsigned long long gpuleak::sim::next_buffer_id() {
    return ++g_last_buffer_id;
}

extern "C" {

CUresult cuPointerGetAttribute(void* data, int attribute, CUdeviceptr ptr) {
    if (!devices_initialized()) {
        return CUDA_ERROR_NOT_INITIALIZED;
    }
    if (data == nullptr) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    if (const std::optional<PointerRange> range = range_containing(ptr)) {
        return describe(data, attribute, ptr, *range);
    }
    const std::optional<Reservation> reservation = reservation_containing(ptr);
    return reservation ? describe_unmapped(data, attribute, *reservation) : CUDA_ERROR_INVALID_VALUE;
}

// Unlike the singular form, an unknown address is no error here: each attribute gets its NULL value.
CUresult cuPointerGetAttributes(unsigned int numAttributes, int* attributes, void** data, CUdeviceptr ptr) {
    if (!devices_initialized()) {
        return CUDA_ERROR_NOT_INITIALIZED;
    }
    if (numAttributes == 0 || attributes == nullptr || data == nullptr) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    const std::optional<PointerRange> range = range_containing(ptr);
    const std::optional<Reservation> reservation = range ? std::nullopt : reservation_containing(ptr);
    for (unsigned int i = 0; i < numAttributes; ++i) {
        if (data[i] == nullptr) {
            return CUDA_ERROR_INVALID_VALUE;
        }
        CUresult result = CUDA_ERROR_INVALID_VALUE;
        if (range) {
            result = describe(data[i], attributes[i], ptr, *range);
        } else if (reservation && describe_unmapped(data[i], attributes[i], *reservation) == CUDA_SUCCESS) {
            result = CUDA_SUCCESS;
        } else {
            result = describe_unknown(data[i], attributes[i]);
        }
        if (result == CUDA_ERROR_INVALID_VALUE && attributes[i] == CU_POINTER_ATTRIBUTE_HOST_POINTER) {
            // Device memory has no host address: NULL here, where the singular form fails.
            store(data[i], static_cast<void*>(nullptr));
        } else if (result != CUDA_SUCCESS) {
            return result;
        }
    }
    return CUDA_SUCCESS;
}

} // extern "C"
