// libnccl.so.2: NCCL refuses every call with ncclInvalidUsage, and its error texts say why (PyTorch's
// DistBackendError quotes both). Its version is answered: PyTorch asks for it when it loads.
#include <nccl.h>
#include <nccl_device/core.h>

#include <string>

#include "refused.h"

using gpuleak::sim::RefusedLibrary;

namespace {

RefusedLibrary nccl_stand_in("NCCL", "ncclInvalidUsage");

} // namespace

extern "C" {

#define GPULEAK_RELEASED(ret, name, params) GPULEAK_RELEASED_FUNCTION(ncclSuccess, ret, name, params)
#define GPULEAK_REFUSED(ret, name, params)                                                                   \
    GPULEAK_REFUSED_FUNCTION(nccl_stand_in, ncclInvalidUsage, ret, name, params)
#include "nccl.def"

ncclResult_t ncclGetVersion(int* version) {
    if (version == nullptr) {
        return ncclInvalidArgument;
    }
    *version = NCCL_VERSION_CODE;
    return ncclSuccess;
}

// The results the stand-in returns, in NCCL's words.
const char* ncclGetErrorString(ncclResult_t result) {
    static const std::string refused = std::string("invalid usage: ") + nccl_stand_in.refusal();
    switch (result) {
    case ncclSuccess:
        return "no error";
    case ncclInvalidArgument:
        return "invalid argument (run with NCCL_DEBUG=WARN for details)";
    case ncclInvalidUsage:
        return refused.c_str();
    default:
        return "unknown result code";
    }
}

const char* ncclGetLastError(ncclComm_t /*comm*/) {
    return nccl_stand_in.refused() ? nccl_stand_in.refusal() : "";
}

} // extern "C"
