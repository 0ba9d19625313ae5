// Stream capture and CUDA graphs. The simulator never captures: every stream reports that it is not
// capturing, and starting a capture or running a graph fails with cudaErrorNotSupported, so a program
// that needs graphs (torch.cuda.graphs, torch.compile's "reduce-overhead") learns so at once.
#include "runtime_api.h"
#include "runtime_state.h"

using namespace gpuleak::sim;

namespace {

cudaError_t not_capturing(cudaStream_t stream, cudaStreamCaptureStatus* status) {
    return with_context([&](const DriverFunctions& cu) {
        if (status == nullptr) {
            return CUDA_ERROR_INVALID_VALUE;
        }
        const CUresult result = cu.stream_query(stream);
        if (result == CUDA_SUCCESS) {
            *status = cudaStreamCaptureStatusNone;
        }
        return result;
    });
}

cudaError_t unsupported() {
    return record_error(cudaErrorNotSupported);
}

} // namespace

extern "C" {

cudaError_t cudaStreamIsCapturing(cudaStream_t stream, cudaStreamCaptureStatus* pCaptureStatus) {
    return not_capturing(stream, pCaptureStatus);
}

// With no capture under way the other out-parameters are left as they are, as the runtime documents.
cudaError_t cudaStreamGetCaptureInfo(cudaStream_t stream, cudaStreamCaptureStatus* captureStatus_out,
                                     unsigned long long* /*id_out*/, cudaGraph_t* /*graph_out*/,
                                     const cudaGraphNode_t** /*dependencies_out*/,
                                     const cudaGraphEdgeData** /*edgeData_out*/,
                                     size_t* /*numDependencies_out*/) {
    return not_capturing(stream, captureStatus_out);
}

// The mode is the driver's, whose modes have the runtime's numbers.
cudaError_t cudaThreadExchangeStreamCaptureMode(cudaStreamCaptureMode* mode) {
    const DriverFunctions* cu = driver_functions();
    if (cu == nullptr) {
        return record_error(cudaErrorInsufficientDriver);
    }
    if (mode == nullptr) {
        return record_error(cudaErrorInvalidValue);
    }
    return record_error(from_driver(cu->thread_exchange_stream_capture_mode(mode)));
}

cudaError_t cudaStreamBeginCapture(cudaStream_t /*stream*/, cudaStreamCaptureMode /*mode*/) {
    return unsupported();
}

cudaError_t cudaStreamEndCapture(cudaStream_t /*stream*/, cudaGraph_t* /*pGraph*/) {
    return unsupported();
}

cudaError_t cudaGraphInstantiateWithFlags(cudaGraphExec_t* /*pGraphExec*/, cudaGraph_t /*graph*/,
                                          unsigned long long /*flags*/) {
    return unsupported();
}

cudaError_t cudaGraphLaunch(cudaGraphExec_t /*graphExec*/, cudaStream_t /*stream*/) {
    return unsupported();
}

cudaError_t cudaGraphDestroy(cudaGraph_t /*graph*/) {
    return unsupported();
}

cudaError_t cudaGraphExecDestroy(cudaGraphExec_t /*graphExec*/) {
    return unsupported();
}

cudaError_t cudaGraphGetNodes(cudaGraph_t /*graph*/, cudaGraphNode_t* /*nodes*/, size_t* /*numNodes*/) {
    return unsupported();
}

cudaError_t cudaGraphNodeGetDependencies(cudaGraphNode_t /*node*/, cudaGraphNode_t* /*pDependencies*/,
                                         cudaGraphEdgeData* /*edgeData*/, size_t* /*pNumDependencies*/) {
    return unsupported();
}

cudaError_t cudaGraphDebugDotPrint(cudaGraph_t /*graph*/, const char* /*path*/, unsigned int /*flags*/) {
    return unsupported();
}

} // extern "C"
