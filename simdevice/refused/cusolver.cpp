// libcusolver.so.12 (and .11): cuSOLVER refuses every call with CUSOLVER_STATUS_NOT_INITIALIZED, as when it
// cannot initialise on a device (PyTorch has no name for CUSOLVER_STATUS_NOT_SUPPORTED). PyTorch names the
// status itself ("cusolver error: CUSOLVER_STATUS_NOT_INITIALIZED, when calling
// `cusolverDnCreate(handle)`"), so the first refusal's line on stderr is what says why.
#include <cusolverDn.h>

#include "refused.h"

using gpuleak::sim::RefusedLibrary;

namespace {

RefusedLibrary cusolver_stand_in("cuSOLVER", "CUSOLVER_STATUS_NOT_INITIALIZED");

} // namespace

extern "C" {

#define GPULEAK_RELEASED(ret, name, params)                                                                  \
    GPULEAK_RELEASED_FUNCTION(CUSOLVER_STATUS_SUCCESS, ret, name, params)
#define GPULEAK_REFUSED(ret, name, params)                                                                   \
    GPULEAK_REFUSED_FUNCTION(cusolver_stand_in, CUSOLVER_STATUS_NOT_INITIALIZED, ret, name, params)
#include "cusolver.def"

cusolverStatus_t cusolverGetProperty(libraryPropertyType type, int* value) {
    return gpuleak::sim::read_version_property(
               type, stand_in_release({CUSOLVER_VER_MAJOR, CUSOLVER_VER_MINOR, CUSOLVER_VER_PATCH}), value)
               ? CUSOLVER_STATUS_SUCCESS
               : CUSOLVER_STATUS_INVALID_VALUE;
}

cusolverStatus_t cusolverGetVersion(int* version) {
    if (version == nullptr)
        return CUSOLVER_STATUS_INVALID_VALUE;
    *version = stand_in_version_number({CUSOLVER_VER_MAJOR, CUSOLVER_VER_MINOR, CUSOLVER_VER_PATCH});
    return CUSOLVER_STATUS_SUCCESS;
}

} // extern "C"
