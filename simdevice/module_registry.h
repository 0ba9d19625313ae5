// The kernels and device variables that nvcc-generated code registers with the runtime when a library
// loads (__cudaRegisterFunction, __cudaRegisterVar), looked up by their host-side addresses.
#pragma once

#include <cstddef>

namespace gpuleak::sim {

// `image` is the fat binary the kernel came in and `device_name` its name there, from which the driver
// makes its CUfunction (kernel_function).
void register_kernel(const void* host_function, const void* image, const char* device_name);
bool known_kernel(const void* host_function);

struct RegisteredKernel {
    const void* image;
    const char* device_name;
};
// False for a kernel never registered.
bool registered_kernel(const void* host_function, RegisteredKernel& kernel);

// Gives the variable zeroed storage of its own, standing in for its copy in device memory (module globals
// live in memory the context owns, which no allocation call obtains, so it is charged to no device).
void register_variable(const void* host_variable, std::size_t size);
// nullptr for a variable never registered.
void* variable_storage(const void* host_variable, std::size_t& size);

} // namespace gpuleak::sim
