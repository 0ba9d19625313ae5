// Registering host memory with the device, forwarded to the driver (where gpuleak records it), and what
// the runtime says about a pointer.
#include "runtime_api.h"
#include "runtime_state.h"

#include <cstring>

using namespace gpuleak::sim;

extern "C" {

cudaError_t cudaHostRegister(void* ptr, size_t size, unsigned int flags) {
    return with_context([&](const DriverFunctions& cu) { return cu.mem_host_register(ptr, size, flags); });
}

cudaError_t cudaHostUnregister(void* ptr) {
    return with_context([&](const DriverFunctions& cu) { return cu.mem_host_unregister(ptr); });
}

// What the driver knows of the pointer (cuPointerGetAttributes, as the real runtime asks it), in the
// runtime's terms: memory it never handed out is "unregistered" host memory at no device.
cudaError_t cudaPointerGetAttributes(cudaPointerAttributes* attributes, const void* ptr) {
    if (attributes == nullptr) {
        return record_error(cudaErrorInvalidValue);
    }
    return with_context([&](const DriverFunctions& cu) {
        int asked[] = {CU_POINTER_ATTRIBUTE_MEMORY_TYPE, CU_POINTER_ATTRIBUTE_IS_MANAGED,
                       CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL};
        unsigned int type = 0;
        unsigned int managed = 0;
        int device = -2;
        void* values[] = {&type, &managed, &device};
        const CUresult result =
            cu.pointer_get_attributes(3, asked, values, reinterpret_cast<CUdeviceptr>(ptr));
        if (result != CUDA_SUCCESS) {
            return result;
        }
        void* pointer = const_cast<void*>(ptr);
        std::memset(attributes, 0, sizeof(*attributes));
        attributes->device = device;
        attributes->type = managed != 0                   ? cudaMemoryTypeManaged
                           : type == CU_MEMORYTYPE_DEVICE ? cudaMemoryTypeDevice
                           : type == CU_MEMORYTYPE_HOST   ? cudaMemoryTypeHost
                                                          : cudaMemoryTypeUnregistered;
        attributes->devicePointer = type == 0 ? nullptr : pointer;
        attributes->hostPointer = attributes->type == cudaMemoryTypeDevice ? nullptr : pointer;
        return CUDA_SUCCESS;
    });
}

} // extern "C"
