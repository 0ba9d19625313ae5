// The registration calls nvcc's generated code makes from a library's constructors (fat binaries, their
// kernels and variables), and the runtime calls that look registered things up. No device code is ever
// loaded: a kernel is known by its host stub's address, which also serves as its cudaKernel_t.
#include "module_registry.h"
#include "runtime_api.h"
#include "runtime_state.h"

#include <cstring>
#include <map>
#include <mutex>
#include <utility>

using namespace gpuleak::sim;

namespace {

// What __cudaRegisterFatBinary hands back: the generated code only stores it and passes it back.
struct FatBinary {
    void* image;
};

// A kernel whose resources nobody measured: numbers a compiled kernel of compute capability 9.0 could
// have, within every limit of the simulated device.
constexpr int kThreadsPerBlock = 1024;
constexpr int kRegisters = 32;
constexpr int kArchitecture = 90;
constexpr int kDynamicSharedBytes = 49152;

// The driver's functions handed out by cudaGetFuncBySymbol, by host stub and device: each device's
// context loads the kernel's image as a module of its own, as the real runtime does.
std::mutex g_functions_mutex;
std::map<std::pair<const void*, int>, CUfunction> g_functions;

} // namespace

extern "C" {

void** __cudaRegisterFatBinary(void* fatCubin) {
    return reinterpret_cast<void**>(new FatBinary{fatCubin});
}

void __cudaRegisterFatBinaryEnd(void** /*fatCubinHandle*/) {}

// Kernels stay known: a stub address is never reused while its library is loaded, and the generated code
// unregisters only when the library is unloaded.
void __cudaUnregisterFatBinary(void** fatCubinHandle) {
    delete reinterpret_cast<FatBinary*>(fatCubinHandle);
}

// The names stay valid while the library is loaded: they are its own read-only strings.
void __cudaRegisterFunction(void** fatCubinHandle, const char* hostFun, char* deviceFun,
                            const char* /*deviceName*/, int /*thread_limit*/, uint3* /*tid*/, uint3* /*bid*/,
                            dim3* /*bDim*/, dim3* /*gDim*/, int* /*wSize*/) {
    register_kernel(hostFun, reinterpret_cast<FatBinary*>(fatCubinHandle)->image, deviceFun);
}

void __cudaRegisterVar(void** /*fatCubinHandle*/, char* hostVar, char* /*deviceAddress*/,
                       const char* /*deviceName*/, int /*ext*/, size_t size, int /*constant*/,
                       int /*global*/) {
    register_variable(hostVar, size);
}

// Modules are never loaded onto the simulated device, so initialising one always succeeds.
char __cudaInitModule(void** /*fatCubinHandle*/) {
    return 1;
}

cudaError_t __cudaGetKernel(cudaKernel_t* kernel, const void* hostFun) {
    if (kernel == nullptr) {
        return record_error(cudaErrorInvalidValue);
    }
    if (!known_kernel(hostFun)) {
        return record_error(cudaErrorInvalidDeviceFunction);
    }
    *kernel = reinterpret_cast<cudaKernel_t>(const_cast<void*>(hostFun));
    return cudaSuccess;
}

cudaError_t cudaGetSymbolAddress(void** devPtr, const void* symbol) {
    return with_context([&](const DriverFunctions&) {
        std::size_t size = 0;
        void* storage = variable_storage(symbol, size);
        if (devPtr == nullptr || storage == nullptr) {
            return CUDA_ERROR_INVALID_VALUE;
        }
        *devPtr = storage;
        return CUDA_SUCCESS;
    });
}

cudaError_t cudaMemcpyToSymbol(const void* symbol, const void* src, size_t count, size_t offset,
                               cudaMemcpyKind /*kind*/) {
    return with_context([&](const DriverFunctions&) {
        std::size_t size = 0;
        void* storage = variable_storage(symbol, size);
        if (storage == nullptr || src == nullptr || offset > size || count > size - offset) {
            return CUDA_ERROR_INVALID_VALUE;
        }
        std::memcpy(static_cast<char*>(storage) + offset, src, count);
        return CUDA_SUCCESS;
    });
}

// The driver's function for a registered kernel, as XLA launches its own kernels through the driver: its
// fat binary loaded as a module of the current device's context, once per kernel and device, and the
// kernel looked up there.
cudaError_t cudaGetFuncBySymbol(cudaFunction_t* functionPtr, const void* symbolPtr) {
    RegisteredKernel kernel{};
    if (functionPtr == nullptr) {
        return record_error(cudaErrorInvalidValue);
    }
    if (!registered_kernel(symbolPtr, kernel)) {
        return record_error(cudaErrorInvalidDeviceFunction);
    }
    return with_context([&](const DriverFunctions& cu) {
        const std::lock_guard lock(g_functions_mutex);
        const std::pair<const void*, int> key{symbolPtr, selected_device()};
        if (const auto found = g_functions.find(key); found != g_functions.end()) {
            *functionPtr = found->second;
            return CUDA_SUCCESS;
        }
        CUmodule module = nullptr;
        if (const CUresult result = cu.module_load_data(&module, kernel.image); result != CUDA_SUCCESS) {
            return result;
        }
        CUfunction function = nullptr;
        if (const CUresult result = cu.module_get_function(&function, module, kernel.device_name);
            result != CUDA_SUCCESS) {
            cu.module_unload(module);
            return result;
        }
        g_functions.emplace(key, function);
        *functionPtr = function;
        return CUDA_SUCCESS;
    });
}

cudaError_t cudaFuncGetAttributes(cudaFuncAttributes* attr, const void* func) {
    if (attr == nullptr) {
        return record_error(cudaErrorInvalidValue);
    }
    if (!known_kernel(func)) {
        return record_error(cudaErrorInvalidDeviceFunction);
    }
    std::memset(attr, 0, sizeof(*attr));
    attr->maxThreadsPerBlock = kThreadsPerBlock;
    attr->numRegs = kRegisters;
    attr->ptxVersion = kArchitecture;
    attr->binaryVersion = kArchitecture;
    attr->maxDynamicSharedSizeBytes = kDynamicSharedBytes;
    attr->preferredShmemCarveout = -1;
    return cudaSuccess;
}

// Accepted and forgotten: no setting changes what a no-op kernel does.
cudaError_t cudaFuncSetAttribute(const void* func, cudaFuncAttribute /*attr*/, int /*value*/) {
    return record_error(known_kernel(func) ? cudaSuccess : cudaErrorInvalidDeviceFunction);
}

} // extern "C"
