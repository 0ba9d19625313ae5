// What each refusing stand-in includes after its library's headers.
#pragma once

#include "stand_in_library.h"

// The refused functions take their full parameter lists, which they never read, and the library's
// deprecated functions are stood in for like the rest.
#pragma GCC diagnostic ignored "-Wunused-parameter"
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"

// The release a stand-in answers for: its headers' own, or the release its build names where it stands in
// for an older soname than theirs (libcufft.so.11, built against cuFFT 12's headers; refused/CMakeLists.txt).
constexpr gpuleak::sim::Version stand_in_release([[maybe_unused]] gpuleak::sim::Version headers) {
#ifdef GPULEAK_STAND_IN_RELEASE
    return {GPULEAK_STAND_IN_RELEASE};
#else
    return headers;
#endif
}

// That release as cuFFT's and cuSOLVER's GetVersion number it: major * 1000 + minor * 100 + patch.
constexpr int stand_in_version_number(gpuleak::sim::Version headers) {
    const gpuleak::sim::Version release = stand_in_release(headers);
    return release.major * 1000 + release.minor * 100 + release.patch;
}
