// libcusparse.so.12: cuSPARSE refuses every call with CUSPARSE_STATUS_NOT_SUPPORTED, and its error text
// says why (PyTorch's message quotes it).
#include "refused_library.h"

#include <cusparse.h>

#include <string>

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

const char* cusparseGetErrorString(cusparseStatus_t status) {
    static const std::string refused = std::string("operation not supported: ") + cusparse_stand_in.refusal();
    return status == CUSPARSE_STATUS_SUCCESS ? "success" : refused.c_str();
}

} // extern "C"
