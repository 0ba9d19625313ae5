// libcusparse.so.12: cuSPARSE refuses every call with CUSPARSE_STATUS_NOT_SUPPORTED, and its error text
// says why (PyTorch's message quotes it).
#include <cusparse.h>

#include <string>

#include "refused.h"

using gpuleak::sim::RefusedLibrary;

namespace {

RefusedLibrary cusparse_stand_in("cuSPARSE", "CUSPARSE_STATUS_NOT_SUPPORTED");

} // namespace

extern "C" {

#define GPULEAK_RELEASED(ret, name, params)                                                                  \
    GPULEAK_RELEASED_FUNCTION(CUSPARSE_STATUS_SUCCESS, ret, name, params)
#define GPULEAK_REFUSED(ret, name, params)                                                                   \
    GPULEAK_REFUSED_FUNCTION(cusparse_stand_in, CUSPARSE_STATUS_NOT_SUPPORTED, ret, name, params)
#include "cusparse.def"

cusparseStatus_t cusparseGetProperty(libraryPropertyType type, int* value) {
    return gpuleak::sim::read_version_property(
               type, {CUSPARSE_VER_MAJOR, CUSPARSE_VER_MINOR, CUSPARSE_VER_PATCH}, value)
               ? CUSPARSE_STATUS_SUCCESS
               : CUSPARSE_STATUS_INVALID_VALUE;
}

// The statuses the stand-in returns.
const char* cusparseGetErrorString(cusparseStatus_t status) {
    static const std::string refused = std::string("operation not supported: ") + cusparse_stand_in.refusal();
    switch (status) {
    case CUSPARSE_STATUS_SUCCESS:
        return "success";
    case CUSPARSE_STATUS_NOT_SUPPORTED:
        return refused.c_str();
    default:
        return "unknown error";
    }
}

} // extern "C"
