// What the runtime says about a device, composed from the driver's answers (cuDeviceGetAttribute, its
// name, memory size, UUID and PCI address) as the real runtime composes cudaDeviceProp: CUDA 13's, or
// CUDA 12's in the libcudart.so.12 build.
#include "runtime_abi12.h"
#include "runtime_api.h"
#include "runtime_state.h"

#include <cstring>

using namespace gpuleak::sim;

namespace {

// Fills `prop` from the driver; the first failing query's result.
class PropertyReader {
  public:
    PropertyReader(const DriverFunctions& cu, int device) : cu_(cu), device_(device) {}

    template <typename Field> void operator()(Field& field, int attribute) {
        int value = 0;
        if (result_ == CUDA_SUCCESS) {
            result_ = cu_.device_get_attribute(&value, attribute, device_);
        }
        field = static_cast<Field>(value);
    }

    CUresult result() const { return result_; }

  private:
    const DriverFunctions& cu_;
    int device_;
    CUresult result_ = CUDA_SUCCESS;
};

// `Prop` is CUDA 13's cudaDeviceProp or CUDA 12's: the fields only one of them has are read where present.
template <typename Prop> CUresult read_properties(const DriverFunctions& cu, Prop& prop, int device) {
    std::memset(&prop, 0, sizeof(prop));
    if (const CUresult result = cu.device_get_name(prop.name, sizeof(prop.name), device);
        result != CUDA_SUCCESS) {
        return result;
    }
    if (const CUresult result = cu.device_total_mem(&prop.totalGlobalMem, device); result != CUDA_SUCCESS) {
        return result;
    }
    CUuuid uuid{};
    if (const CUresult result = cu.device_get_uuid(&uuid, device); result != CUDA_SUCCESS) {
        return result;
    }
    std::memcpy(prop.uuid.bytes, uuid.bytes, sizeof(prop.uuid.bytes));

    // Attribute numbers are CUdevice_attribute's (cuda.h).
    PropertyReader read(cu, device);
    read(prop.maxThreadsPerBlock, 1);
    read(prop.maxThreadsDim[0], 2);
    read(prop.maxThreadsDim[1], 3);
    read(prop.maxThreadsDim[2], 4);
    read(prop.maxGridSize[0], 5);
    read(prop.maxGridSize[1], 6);
    read(prop.maxGridSize[2], 7);
    read(prop.sharedMemPerBlock, 8);
    read(prop.totalConstMem, 9);
    read(prop.warpSize, 10);
    read(prop.memPitch, 11);
    read(prop.regsPerBlock, 12);
    read(prop.textureAlignment, 14);
    read(prop.multiProcessorCount, 16);
    read(prop.integrated, 18);
    read(prop.canMapHostMemory, 19);
    read(prop.surfaceAlignment, 30);
    read(prop.concurrentKernels, 31);
    read(prop.ECCEnabled, 32);
    read(prop.pciBusID, 33);
    read(prop.pciDeviceID, 34);
    read(prop.tccDriver, 35);
    read(prop.memoryBusWidth, 37);
    read(prop.l2CacheSize, 38);
    read(prop.maxThreadsPerMultiProcessor, 39);
    read(prop.asyncEngineCount, 40);
    read(prop.unifiedAddressing, 41);
    read(prop.pciDomainID, 50);
    if constexpr (requires { prop.clockRate; }) {
        read(prop.clockRate, 13);
        read(prop.deviceOverlap, 15);
        read(prop.kernelExecTimeoutEnabled, 17);
        read(prop.computeMode, 20);
        read(prop.memoryClockRate, 36);
        read(prop.maxTexture1DLinear, 69);
        read(prop.singleToDoublePrecisionPerfRatio, 87);
        read(prop.cooperativeMultiDeviceLaunch, 96);
    }
    read(prop.texturePitchAlignment, 51);
    read(prop.major, 75);
    read(prop.minor, 76);
    read(prop.streamPrioritiesSupported, 78);
    read(prop.globalL1CacheSupported, 79);
    read(prop.localL1CacheSupported, 80);
    read(prop.sharedMemPerMultiprocessor, 81);
    read(prop.regsPerMultiprocessor, 82);
    read(prop.managedMemory, 83);
    read(prop.isMultiGpuBoard, 84);
    read(prop.multiGpuBoardGroupID, 85);
    read(prop.hostNativeAtomicSupported, 86);
    read(prop.pageableMemoryAccess, 88);
    read(prop.concurrentManagedAccess, 89);
    read(prop.computePreemptionSupported, 90);
    read(prop.canUseHostPointerForRegisteredMem, 91);
    read(prop.cooperativeLaunch, 95);
    read(prop.sharedMemPerBlockOptin, 97);
    read(prop.hostRegisterSupported, 99);
    read(prop.pageableMemoryAccessUsesHostPageTables, 100);
    read(prop.directManagedMemAccessFromHost, 101);
    read(prop.maxBlocksPerMultiProcessor, 106);
    read(prop.persistingL2CacheMaxSize, 108);
    read(prop.accessPolicyMaxWindowSize, 109);
    read(prop.reservedSharedMemPerBlock, 111);
    read(prop.sparseCudaArraySupported, 112);
    read(prop.hostRegisterReadOnlySupported, 113);
    read(prop.timelineSemaphoreInteropSupported, 114);
    read(prop.memoryPoolsSupported, 115);
    read(prop.gpuDirectRDMASupported, 116);
    read(prop.gpuDirectRDMAFlushWritesOptions, 117);
    read(prop.gpuDirectRDMAWritesOrdering, 118);
    read(prop.memoryPoolSupportedHandleTypes, 119);
    read(prop.clusterLaunch, 120);
    read(prop.deferredMappingCudaArraySupported, 121);
    read(prop.ipcEventSupported, 125);
    read(prop.unifiedFunctionPointers, 129);
    if constexpr (requires { prop.deviceNumaConfig; }) {
        read(prop.deviceNumaConfig, 130);
        read(prop.deviceNumaId, 131);
        read(prop.mpsEnabled, 133);
        read(prop.hostNumaId, 134);
    }
    return read.result();
}

// Both layouts' entry points, the same call.
template <typename Properties> cudaError_t get_device_properties(Properties* prop, int device) {
    return with_driver([&](const DriverFunctions& cu) {
        return prop == nullptr ? CUDA_ERROR_INVALID_VALUE : read_properties(cu, *prop, device);
    });
}

} // namespace

extern "C" {

cudaError_t cudaGetDeviceProperties(cudaDeviceProp* prop, int device) {
    return get_device_properties(prop, device);
}

#if GPULEAK_SIM_CUDA_VERSION < 13000
// CUDA 12's headers call cudaGetDeviceProperties by this name; CUDA 13 renamed it back with its new layout.
cudaError_t cudaGetDeviceProperties_v2(cuda12::cudaDeviceProp* prop, int device) {
    return get_device_properties(prop, device);
}
#endif

// cudaDeviceAttr numbers are those of CUdevice_attribute.
cudaError_t cudaDeviceGetAttribute(int* value, cudaDeviceAttr attr, int device) {
    return with_driver(
        [&](const DriverFunctions& cu) { return cu.device_get_attribute(value, attr, device); });
}

cudaError_t cudaDeviceGetPCIBusId(char* pciBusId, int len, int device) {
    return with_driver(
        [&](const DriverFunctions& cu) { return cu.device_get_pci_bus_id(pciBusId, len, device); });
}

// Every simulated device shares one address space (the host's), so each can reach every other.
cudaError_t cudaDeviceCanAccessPeer(int* canAccessPeer, int device, int peerDevice) {
    return with_context([&](const DriverFunctions& cu) {
        int count = 0;
        if (const CUresult result = cu.device_get_count(&count); result != CUDA_SUCCESS) {
            return result;
        }
        if (canAccessPeer == nullptr) {
            return CUDA_ERROR_INVALID_VALUE;
        }
        if (device < 0 || device >= count || peerDevice < 0 || peerDevice >= count) {
            return CUDA_ERROR_INVALID_DEVICE;
        }
        *canAccessPeer = device != peerDevice ? 1 : 0;
        return CUDA_SUCCESS;
    });
}

cudaError_t cudaDeviceEnablePeerAccess(int peerDevice, unsigned int flags) {
    return with_context([&](const DriverFunctions& cu) {
        int count = 0;
        if (const CUresult result = cu.device_get_count(&count); result != CUDA_SUCCESS) {
            return result;
        }
        if (flags != 0) {
            return CUDA_ERROR_INVALID_VALUE;
        }
        return peerDevice < 0 || peerDevice >= count || peerDevice == selected_device()
                   ? CUDA_ERROR_INVALID_DEVICE
                   : CUDA_SUCCESS;
    });
}

} // extern "C"
