// cuBLAS handles and their settings: stream, workspace, math and pointer modes; the library's version
// and status texts. A handle holds no device memory: PyTorch hands every handle a workspace from its
// caching allocator (cublasSetWorkspace), which is where a GPU's cuBLAS memory shows in
// memory_reserved(), and the simulated computations need none of their own.
#include "blas_context.h"
#include "blas_library.h"
#include "error_text.h"

#include <new>

using namespace gpuleak::sim;

namespace {

// cublasSetWorkspace refuses a workspace less aligned than this.
constexpr std::uintptr_t kWorkspaceAlignment = 256;

constexpr ErrorText kStatuses[] = {
    {CUBLAS_STATUS_SUCCESS, "CUBLAS_STATUS_SUCCESS", "success"},
    {CUBLAS_STATUS_NOT_INITIALIZED, "CUBLAS_STATUS_NOT_INITIALIZED", "the library was not initialized"},
    {CUBLAS_STATUS_ALLOC_FAILED, "CUBLAS_STATUS_ALLOC_FAILED", "the resource allocation failed"},
    {CUBLAS_STATUS_INVALID_VALUE, "CUBLAS_STATUS_INVALID_VALUE",
     "an invalid numeric value was used as an argument"},
    {CUBLAS_STATUS_ARCH_MISMATCH, "CUBLAS_STATUS_ARCH_MISMATCH",
     "an absent device architectural feature is required"},
    {CUBLAS_STATUS_MAPPING_ERROR, "CUBLAS_STATUS_MAPPING_ERROR", "an access to GPU memory space failed"},
    {CUBLAS_STATUS_EXECUTION_FAILED, "CUBLAS_STATUS_EXECUTION_FAILED", "the GPU program failed to execute"},
    {CUBLAS_STATUS_INTERNAL_ERROR, "CUBLAS_STATUS_INTERNAL_ERROR", "an internal operation failed"},
    {CUBLAS_STATUS_NOT_SUPPORTED, "CUBLAS_STATUS_NOT_SUPPORTED",
     "the functionality requested is not supported"},
    {CUBLAS_STATUS_LICENSE_ERROR, "CUBLAS_STATUS_LICENSE_ERROR",
     "error detected trying to check the license"},
};

// Runs `change` on the handle's settings; a handle that is not live is not initialised.
template <typename Change> cublasStatus_t with_handle(cublasHandle_t handle, Change&& change) {
    return live_handle(handle) ? change(*handle) : CUBLAS_STATUS_NOT_INITIALIZED;
}

// CUBLAS_DEFAULT_MATH (0) to CUBLAS_FP32_EMULATED_BF16X9_MATH (4), or CUBLAS_FP64_EMULATED_FIXEDPOINT_MATH,
// each with or without the flag.
bool valid_math_mode(cublasMath_t mode) {
    const cublasMath_t base = mode & ~CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION;
    return (base >= 0 && base <= CUBLAS_FP32_EMULATED_BF16X9_MATH) ||
           base == CUBLAS_FP64_EMULATED_FIXEDPOINT_MATH;
}

} // namespace

extern "C" {

cublasStatus_t cublasCreate_v2(cublasHandle_t* handle) {
    if (handle == nullptr) {
        return CUBLAS_STATUS_INVALID_VALUE;
    }
    if (const cublasStatus_t status = blas_library_status(); status != CUBLAS_STATUS_SUCCESS) {
        return status;
    }
    auto* context = new (std::nothrow) cublasContext{};
    if (context == nullptr) {
        return CUBLAS_STATUS_ALLOC_FAILED;
    }
    context->lt.mark = kBlasHandleMark;
    *handle = context;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasDestroy_v2(cublasHandle_t handle) {
    return with_handle(handle, [](cublasContext& context) {
        delete &context;
        return CUBLAS_STATUS_SUCCESS;
    });
}

cublasStatus_t cublasSetStream_v2(cublasHandle_t handle, cudaStream_t streamId) {
    return with_handle(handle, [&](cublasContext& context) {
        context.stream = streamId;
        return CUBLAS_STATUS_SUCCESS;
    });
}

cublasStatus_t cublasGetStream_v2(cublasHandle_t handle, cudaStream_t* streamId) {
    return with_handle(handle, [&](cublasContext& context) {
        if (streamId == nullptr) {
            return CUBLAS_STATUS_INVALID_VALUE;
        }
        *streamId = context.stream;
        return CUBLAS_STATUS_SUCCESS;
    });
}

cublasStatus_t cublasSetWorkspace_v2(cublasHandle_t handle, void* workspace,
                                     size_t /*workspaceSizeInBytes*/) {
    return with_handle(handle, [&](cublasContext&) {
        return reinterpret_cast<std::uintptr_t>(workspace) % kWorkspaceAlignment == 0
                   ? CUBLAS_STATUS_SUCCESS
                   : CUBLAS_STATUS_INVALID_VALUE;
    });
}

cublasStatus_t cublasSetMathMode(cublasHandle_t handle, cublasMath_t mode) {
    return with_handle(handle, [&](cublasContext& context) {
        if (!valid_math_mode(mode)) {
            return CUBLAS_STATUS_INVALID_VALUE;
        }
        context.math_mode = mode;
        return CUBLAS_STATUS_SUCCESS;
    });
}

cublasStatus_t cublasGetMathMode(cublasHandle_t handle, cublasMath_t* mode) {
    return with_handle(handle, [&](cublasContext& context) {
        if (mode == nullptr) {
            return CUBLAS_STATUS_INVALID_VALUE;
        }
        *mode = context.math_mode;
        return CUBLAS_STATUS_SUCCESS;
    });
}

cublasStatus_t cublasSetPointerMode_v2(cublasHandle_t handle, cublasPointerMode_t mode) {
    return with_handle(handle, [&](cublasContext& context) {
        if (mode != 0 && mode != CUBLAS_POINTER_MODE_DEVICE) {
            return CUBLAS_STATUS_INVALID_VALUE;
        }
        context.pointer_mode = mode;
        return CUBLAS_STATUS_SUCCESS;
    });
}

cublasStatus_t cublasGetPointerMode_v2(cublasHandle_t handle, cublasPointerMode_t* mode) {
    return with_handle(handle, [&](cublasContext& context) {
        if (mode == nullptr) {
            return CUBLAS_STATUS_INVALID_VALUE;
        }
        *mode = context.pointer_mode;
        return CUBLAS_STATUS_SUCCESS;
    });
}

cublasStatus_t cublasGetVersion_v2(cublasHandle_t /*handle*/, int* version) {
    if (version == nullptr) {
        return CUBLAS_STATUS_INVALID_VALUE;
    }
    *version = kCublasVersion;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasGetProperty(libraryPropertyType type, int* value) {
    return blas_property(type, value);
}

const char* cublasGetStatusName(cublasStatus_t status) {
    const ErrorText* text = find_error(kStatuses, status);
    return text != nullptr ? text->name : "CUBLAS_STATUS_UNKNOWN";
}

const char* cublasGetStatusString(cublasStatus_t status) {
    const ErrorText* text = find_error(kStatuses, status);
    return text != nullptr ? text->description : "unknown error";
}

} // extern "C"
