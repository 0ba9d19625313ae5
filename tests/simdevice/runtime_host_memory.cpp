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

// Not yet told apart: every pointer is reported as memory the device does not know (what a GPU says of
// plain pageable host memory), so PyTorch sees no tensor as pinned.
cudaError_t cudaPointerGetAttributes(cudaPointerAttributes* attributes, const void* ptr) {
    if (attributes == nullptr) {
        return record_error(cudaErrorInvalidValue);
    }
    std::memset(attributes, 0, sizeof(*attributes));
    attributes->type = cudaMemoryTypeUnregistered;
    attributes->device = -2;
    attributes->hostPointer = const_cast<void*>(ptr);
    return cudaSuccess;
}

} // extern "C"
