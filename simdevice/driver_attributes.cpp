// What the driver says a simulated device is: cuDeviceGetAttribute, its UUID and PCI address. The
// numbers are those of a plausible data-centre GPU of compute capability 9.0 (one that PyTorch's CUDA
// 13 wheels carry kernels for, so that it raises no "unsupported GPU" warning); only the memory size,
// the name (driver_devices.cpp) and the identifiers are the simulator's own.
#include "device_state.h"
#include "driver_api.h"

#include <cstdio>
#include <cstring>

using namespace gpuleak::sim;

namespace {

struct Attribute {
    int id; // CUdevice_attribute
    int value;
};

// Attributes absent from this table read as 0 (unsupported), as an unknown feature does on a GPU.
constexpr Attribute kAttributes[] = {
    {1, 1024},        // MAX_THREADS_PER_BLOCK
    {2, 1024},        // MAX_BLOCK_DIM_X
    {3, 1024},        // MAX_BLOCK_DIM_Y
    {4, 64},          // MAX_BLOCK_DIM_Z
    {5, 2147483647},  // MAX_GRID_DIM_X
    {6, 65535},       // MAX_GRID_DIM_Y
    {7, 65535},       // MAX_GRID_DIM_Z
    {8, 49152},       // MAX_SHARED_MEMORY_PER_BLOCK
    {9, 65536},       // TOTAL_CONSTANT_MEMORY
    {10, 32},         // WARP_SIZE
    {11, 2147483647}, // MAX_PITCH
    {12, 65536},      // MAX_REGISTERS_PER_BLOCK
    {13, 1755000},    // CLOCK_RATE (kHz)
    {14, 512},        // TEXTURE_ALIGNMENT
    {15, 1},          // GPU_OVERLAP
    {16, 132},        // MULTIPROCESSOR_COUNT
    {19, 1},          // CAN_MAP_HOST_MEMORY
    {30, 512},        // SURFACE_ALIGNMENT
    {31, 1},          // CONCURRENT_KERNELS
    {36, 2619000},    // MEMORY_CLOCK_RATE (kHz)
    {37, 5120},       // GLOBAL_MEMORY_BUS_WIDTH
    {38, 52428800},   // L2_CACHE_SIZE
    {39, 2048},       // MAX_THREADS_PER_MULTIPROCESSOR
    {40, 5},          // ASYNC_ENGINE_COUNT
    {41, 1},          // UNIFIED_ADDRESSING
    {51, 32},         // TEXTURE_PITCH_ALIGNMENT
    {75, 9},          // COMPUTE_CAPABILITY_MAJOR
    {76, 0},          // COMPUTE_CAPABILITY_MINOR
    {78, 1},          // STREAM_PRIORITIES_SUPPORTED
    {79, 1},          // GLOBAL_L1_CACHE_SUPPORTED
    {80, 1},          // LOCAL_L1_CACHE_SUPPORTED
    {81, 233472},     // MAX_SHARED_MEMORY_PER_MULTIPROCESSOR
    {82, 65536},      // MAX_REGISTERS_PER_MULTIPROCESSOR
    {83, 1},          // MANAGED_MEMORY
    {86, 1},          // HOST_NATIVE_ATOMIC_SUPPORTED
    {87, 2},          // SINGLE_TO_DOUBLE_PRECISION_PERF_RATIO
    {89, 1},          // CONCURRENT_MANAGED_ACCESS
    {90, 1},          // COMPUTE_PREEMPTION_SUPPORTED
    {91, 1},          // CAN_USE_HOST_POINTER_FOR_REGISTERED_MEM
    {95, 1},          // COOPERATIVE_LAUNCH
    {97, 232448},     // MAX_SHARED_MEMORY_PER_BLOCK_OPTIN
    {99, 1},          // HOST_REGISTER_SUPPORTED
    {102, 1},         // VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED (vmm.cpp)
    {103, 1},         // HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED
    {106, 32},        // MAX_BLOCKS_PER_MULTIPROCESSOR
    {108, 32505856},  // MAX_PERSISTING_L2_CACHE_SIZE
    {109, 134213632}, // MAX_ACCESS_POLICY_WINDOW_SIZE
    {111, 1024},      // RESERVED_SHARED_MEMORY_PER_BLOCK
    {113, 1},         // READ_ONLY_HOST_REGISTER_SUPPORTED
    {115, 1},         // MEMORY_POOLS_SUPPORTED
    {119, 1},         // MEMPOOL_SUPPORTED_HANDLE_TYPES (POSIX file descriptor)
    {120, 1},         // CLUSTER_LAUNCH
    {126, 4},         // MEM_SYNC_DOMAIN_COUNT
    {131, -1},        // NUMA_ID
    {134, -1},        // HOST_NUMA_ID
};

// CU_DEVICE_ATTRIBUTE_PCI_BUS_ID, _PCI_DEVICE_ID and _PCI_DOMAIN_ID: device N sits on bus N + 1.
constexpr int kPciBusId = 33;
constexpr int kPciDeviceId = 34;
constexpr int kPciDomainId = 50;
constexpr int kMaxAttribute = 145;

CUresult check_device(CUdevice dev) {
    if (!devices_initialized()) {
        return CUDA_ERROR_NOT_INITIALIZED;
    }
    return valid_device(dev) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_DEVICE;
}

int attribute_value(int attrib, CUdevice dev) {
    switch (attrib) {
    case kPciBusId:
        return dev + 1;
    case kPciDeviceId:
    case kPciDomainId:
        return 0;
    default:
        break;
    }
    for (const Attribute& attribute : kAttributes) {
        if (attribute.id == attrib) {
            return attribute.value;
        }
    }
    return 0;
}

} // namespace

extern "C" {

CUresult cuDeviceGetAttribute(int* pi, int attrib, CUdevice dev) {
    if (const CUresult result = check_device(dev); result != CUDA_SUCCESS) {
        return result;
    }
    if (pi == nullptr || attrib <= 0 || attrib > kMaxAttribute) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    *pi = attribute_value(attrib, dev);
    return CUDA_SUCCESS;
}

CUresult cuDeviceGetUuid(CUuuid* uuid, CUdevice dev) {
    return cuDeviceGetUuid_v2(uuid, dev);
}

// A fixed UUID per ordinal whose first bytes spell "gpuleak-sim", so that it is recognisable wherever it
// is printed (nvidia-smi style "GPU-67707..." strings, PyTorch's device properties).
CUresult cuDeviceGetUuid_v2(CUuuid* uuid, CUdevice dev) {
    if (const CUresult result = check_device(dev); result != CUDA_SUCCESS) {
        return result;
    }
    if (uuid == nullptr) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    constexpr char kPrefix[] = "gpuleak-sim";
    std::memset(uuid->bytes, 0, sizeof(uuid->bytes));
    std::memcpy(uuid->bytes, kPrefix, sizeof(kPrefix) - 1);
    uuid->bytes[sizeof(uuid->bytes) - 1] = static_cast<char>(dev);
    return CUDA_SUCCESS;
}

CUresult cuDeviceGetPCIBusId(char* pciBusId, int len, CUdevice dev) {
    if (const CUresult result = check_device(dev); result != CUDA_SUCCESS) {
        return result;
    }
    if (pciBusId == nullptr || len <= 0) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    std::snprintf(pciBusId, static_cast<size_t>(len), "%04x:%02x:%02x.0", attribute_value(kPciDomainId, dev),
                  attribute_value(kPciBusId, dev), attribute_value(kPciDeviceId, dev));
    return CUDA_SUCCESS;
}

} // extern "C"
