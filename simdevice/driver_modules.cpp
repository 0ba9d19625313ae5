// Modules, JIT linking and launches through the driver, as PyTorch's NVRTC-compiled kernels (jiterator,
// torch.cuda.jiterator, fused optimisers' generated code) use them. No code is ever loaded or run: any
// image loads as an empty module whose functions exist under every name, and a launch only checks its
// stream, so memory accounting stays exact while device memory contents mean nothing.
#include "device_state.h"
#include "driver_api.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

struct CUmod_st {
    // Functions by name, created on first lookup; a module owns its functions, as on a GPU.
    std::unordered_map<std::string, std::unique_ptr<CUfunc_st>> functions;
};

struct CUfunc_st {
    CUmodule module;
};

struct CUlinkState_st {
    // What cuLinkComplete hands out; valid until cuLinkDestroy, as documented.
    char cubin[16];
};

using namespace gpuleak::sim;

namespace {

// As for the runtime's kernels (runtime_modules.cpp): numbers within every limit of the simulated device.
constexpr int kThreadsPerBlock = 1024;
constexpr int kRegisters = 32;
constexpr int kArchitecture = 90;
constexpr int kThreadsPerMultiprocessor = 2048;
constexpr int kBlocksPerMultiprocessor = 32;

std::mutex g_mutex;

CUresult load_module(CUmodule* module, const void* image) {
    int device = 0;
    if (const CUresult result = current_device(device); result != CUDA_SUCCESS) {
        return result;
    }
    if (module == nullptr || image == nullptr) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    *module = new CUmod_st;
    return CUDA_SUCCESS;
}

CUresult launch(CUfunction f, CUstream stream) {
    if (f == nullptr) {
        return CUDA_ERROR_INVALID_HANDLE;
    }
    int device = 0;
    return stream_device(stream, device);
}

} // namespace

extern "C" {

CUresult cuModuleLoad(CUmodule* module, const char* fname) {
    return load_module(module, fname);
}

CUresult cuModuleLoadData(CUmodule* module, const void* image) {
    return load_module(module, image);
}

CUresult cuModuleLoadDataEx(CUmodule* module, const void* image, unsigned int /*numOptions*/,
                            int* /*options*/, void** /*optionValues*/) {
    return load_module(module, image);
}

// XLA loads the kernels it compiles (Triton's among them) as fat binaries.
CUresult cuModuleLoadFatBinary(CUmodule* module, const void* fatCubin) {
    return load_module(module, fatCubin);
}

CUresult cuModuleUnload(CUmodule hmod) {
    if (hmod == nullptr) {
        return CUDA_ERROR_INVALID_HANDLE;
    }
    delete hmod;
    return CUDA_SUCCESS;
}

CUresult cuModuleGetFunction(CUfunction* hfunc, CUmodule hmod, const char* name) {
    if (hfunc == nullptr || name == nullptr) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    if (hmod == nullptr) {
        return CUDA_ERROR_INVALID_HANDLE;
    }
    const std::lock_guard lock(g_mutex);
    auto& function = hmod->functions[name];
    if (!function) {
        function = std::make_unique<CUfunc_st>(CUfunc_st{hmod});
    }
    *hfunc = function.get();
    return CUDA_SUCCESS;
}

CUresult cuLinkCreate_v2(unsigned int /*numOptions*/, int* /*options*/, void** /*optionValues*/,
                         CUlinkState* stateOut) {
    int device = 0;
    if (const CUresult result = current_device(device); result != CUDA_SUCCESS) {
        return result;
    }
    if (stateOut == nullptr) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    *stateOut = new CUlinkState_st{};
    return CUDA_SUCCESS;
}

CUresult cuLinkAddData_v2(CUlinkState state, int /*type*/, void* data, size_t size, const char* /*name*/,
                          unsigned int /*numOptions*/, int* /*options*/, void** /*optionValues*/) {
    if (state == nullptr) {
        return CUDA_ERROR_INVALID_HANDLE;
    }
    return data == nullptr || size == 0 ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
}

CUresult cuLinkComplete(CUlinkState state, void** cubinOut, size_t* sizeOut) {
    if (state == nullptr) {
        return CUDA_ERROR_INVALID_HANDLE;
    }
    if (cubinOut == nullptr || sizeOut == nullptr) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    *cubinOut = state->cubin;
    *sizeOut = sizeof(state->cubin);
    return CUDA_SUCCESS;
}

CUresult cuLinkDestroy(CUlinkState state) {
    if (state == nullptr) {
        return CUDA_ERROR_INVALID_HANDLE;
    }
    delete state;
    return CUDA_SUCCESS;
}

// CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK (0), _NUM_REGS (4), _PTX_VERSION (5), _BINARY_VERSION (6);
// the sizes and the rest read as 0.
CUresult cuFuncGetAttribute(int* pi, int attrib, CUfunction hfunc) {
    if (pi == nullptr) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    if (hfunc == nullptr) {
        return CUDA_ERROR_INVALID_HANDLE;
    }
    switch (attrib) {
    case 0:
        *pi = kThreadsPerBlock;
        break;
    case 4:
        *pi = kRegisters;
        break;
    case 5:
    case 6:
        *pi = kArchitecture;
        break;
    default:
        *pi = 0;
        break;
    }
    return CUDA_SUCCESS;
}

// Accepted and forgotten: no setting changes what a no-op kernel does.
CUresult cuFuncSetAttribute(CUfunction hfunc, int /*attrib*/, int /*value*/) {
    return hfunc == nullptr ? CUDA_ERROR_INVALID_HANDLE : CUDA_SUCCESS;
}

CUresult cuFuncSetCacheConfig(CUfunction hfunc, int /*config*/) {
    return hfunc == nullptr ? CUDA_ERROR_INVALID_HANDLE : CUDA_SUCCESS;
}

CUresult cuLaunchKernel(CUfunction f, unsigned int /*gridDimX*/, unsigned int /*gridDimY*/,
                        unsigned int /*gridDimZ*/, unsigned int /*blockDimX*/, unsigned int /*blockDimY*/,
                        unsigned int /*blockDimZ*/, unsigned int /*sharedMemBytes*/, CUstream hStream,
                        void** /*kernelParams*/, void** /*extra*/) {
    return launch(f, hStream);
}

CUresult cuLaunchKernelEx(const CUlaunchConfig* config, CUfunction f, void** /*kernelParams*/,
                          void** /*extra*/) {
    if (config == nullptr || (config->numAttrs > 0 && config->attrs == nullptr)) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    return launch(f, config->hStream);
}

CUresult cuLaunchCooperativeKernel(CUfunction f, unsigned int /*gridDimX*/, unsigned int /*gridDimY*/,
                                   unsigned int /*gridDimZ*/, unsigned int /*blockDimX*/,
                                   unsigned int /*blockDimY*/, unsigned int /*blockDimZ*/,
                                   unsigned int /*sharedMemBytes*/, CUstream hStream,
                                   void** /*kernelParams*/) {
    return launch(f, hStream);
}

CUresult cuOccupancyMaxActiveBlocksPerMultiprocessor(int* numBlocks, CUfunction func, int blockSize,
                                                     size_t /*dynamicSMemSize*/) {
    if (numBlocks == nullptr || blockSize <= 0) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    if (func == nullptr) {
        return CUDA_ERROR_INVALID_HANDLE;
    }
    *numBlocks = std::clamp(kThreadsPerMultiprocessor / blockSize, 1, kBlocksPerMultiprocessor);
    return CUDA_SUCCESS;
}

// Tensor memory accelerator descriptors describe hardware the simulator does not have.
CUresult cuTensorMapEncodeTiled(void* /*tensorMap*/, int /*tensorDataType*/, std::uint32_t /*tensorRank*/,
                                void* /*globalAddress*/, const cuuint64_t* /*globalDim*/,
                                const cuuint64_t* /*globalStrides*/, const std::uint32_t* /*boxDim*/,
                                const std::uint32_t* /*elementStrides*/, int /*interleave*/, int /*swizzle*/,
                                int /*l2Promotion*/, int /*oobFill*/) {
    return CUDA_ERROR_NOT_SUPPORTED;
}

} // extern "C"
