// libcudnn.so.9: cuDNN refuses every call with CUDNN_STATUS_NOT_SUPPORTED, and its error texts say why;
// only its handle is made, as TensorFlow and XLA make one at their first compiled step whatever the
// model, and fail without it. So a Keras model of dense layers trains, and a convolution fails at its
// first cuDNN call. The test bed keeps PyTorch off cuDNN (../python/sitecustomize.py), so a PyTorch
// program reaches this only when it turns cuDNN back on.
#include <cuda_runtime_api.h>
#include <cudnn.h>

#include <string>

#include "refused.h"

using gpuleak::sim::RefusedLibrary;

namespace {

RefusedLibrary cudnn_stand_in("cuDNN", "CUDNN_STATUS_NOT_SUPPORTED");

} // namespace

// What a handle holds: the stream its work would be ordered on.
struct cudnnContext {
    cudaStream_t stream = nullptr;
};

extern "C" {

#define GPULEAK_RELEASED(ret, name, params) GPULEAK_RELEASED_FUNCTION(CUDNN_STATUS_SUCCESS, ret, name, params)
#define GPULEAK_REFUSED(ret, name, params)                                                                   \
    GPULEAK_REFUSED_FUNCTION(cudnn_stand_in, CUDNN_STATUS_NOT_SUPPORTED, ret, name, params)
#include "cudnn.def"

cudnnStatus_t cudnnCreate(cudnnHandle_t* handle) {
    if (handle == nullptr) {
        return CUDNN_STATUS_BAD_PARAM;
    }
    *handle = new cudnnContext;
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnDestroy(cudnnHandle_t handle) {
    if (handle == nullptr) {
        return CUDNN_STATUS_BAD_PARAM;
    }
    delete handle;
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnSetStream(cudnnHandle_t handle, cudaStream_t streamId) {
    if (handle == nullptr) {
        return CUDNN_STATUS_BAD_PARAM;
    }
    handle->stream = streamId;
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnGetStream(cudnnHandle_t handle, cudaStream_t* streamId) {
    if (handle == nullptr || streamId == nullptr) {
        return CUDNN_STATUS_BAD_PARAM;
    }
    *streamId = handle->stream;
    return CUDNN_STATUS_SUCCESS;
}

size_t cudnnGetVersion(void) {
    return CUDNN_VERSION;
}

size_t cudnnGetCudartVersion(void) {
    return CUDART_VERSION;
}

cudnnStatus_t cudnnGetProperty(libraryPropertyType type, int* value) {
    return gpuleak::sim::read_version_property(type, {CUDNN_MAJOR, CUDNN_MINOR, CUDNN_PATCHLEVEL}, value)
               ? CUDNN_STATUS_SUCCESS
               : CUDNN_STATUS_BAD_PARAM;
}

// The statuses the stand-in returns; PyTorch's message is "cuDNN error: " followed by this.
const char* cudnnGetErrorString(cudnnStatus_t status) {
    static const std::string refused = std::string("CUDNN_STATUS_NOT_SUPPORTED: ") + cudnn_stand_in.refusal();
    switch (status) {
    case CUDNN_STATUS_SUCCESS:
        return "CUDNN_STATUS_SUCCESS";
    case CUDNN_STATUS_BAD_PARAM:
        return "CUDNN_STATUS_BAD_PARAM";
    case CUDNN_STATUS_NOT_SUPPORTED:
        return refused.c_str();
    default:
        return "CUDNN_STATUS_UNKNOWN";
    }
}

void cudnnGetLastErrorString(char* message, size_t max_size) {
    gpuleak::sim::copy_text(cudnn_stand_in.refused() ? cudnn_stand_in.refusal() : "", message, max_size);
}

} // extern "C"
