// libcufft.so.12 (and .11): cuFFT refuses every call with CUFFT_NOT_SUPPORTED. PyTorch names that status
// itself ("cuFFT error: CUFFT_NOT_SUPPORTED"), so the first refusal's line on stderr is what says why.
#include <cufft.h>
#include <cufftXt.h>

#include "refused.h"

using gpuleak::sim::RefusedLibrary;

namespace {

RefusedLibrary cufft_stand_in("cuFFT", "CUFFT_NOT_SUPPORTED");

} // namespace

extern "C" {

#define GPULEAK_RELEASED(ret, name, params) GPULEAK_RELEASED_FUNCTION(CUFFT_SUCCESS, ret, name, params)
#define GPULEAK_REFUSED(ret, name, params)                                                                   \
    GPULEAK_REFUSED_FUNCTION(cufft_stand_in, CUFFT_NOT_SUPPORTED, ret, name, params)
#include "cufft.def"

cufftResult cufftGetVersion(int* version) {
    if (version == nullptr) {
        return CUFFT_INVALID_VALUE;
    }
    *version = stand_in_version_number({CUFFT_VER_MAJOR, CUFFT_VER_MINOR, CUFFT_VER_PATCH});
    return CUFFT_SUCCESS;
}

cufftResult cufftGetProperty(libraryPropertyType type, int* value) {
    return gpuleak::sim::read_version_property(
               type, stand_in_release({CUFFT_VER_MAJOR, CUFFT_VER_MINOR, CUFFT_VER_PATCH}), value)
               ? CUFFT_SUCCESS
               : CUFFT_INVALID_VALUE;
}

} // extern "C"
