#include "stand_in_library.h"

#include <algorithm>
#include <cstdio>
#include <cstring>

namespace gpuleak::sim {

RefusedLibrary::RefusedLibrary(const char* what, const char* status)
    : what_(what), status_(status),
      refusal_(std::string(what) + " cannot run on the gpuleak simulated CUDA device") {}

void RefusedLibrary::explain(const char* function) {
    if (!explained_.exchange(true)) {
        std::fprintf(
            stderr,
            "gpuleak-sim: %s cannot run on the simulated CUDA device; %s returned %s, and so will every "
            "call that needs it (gpuleak's docs/simulated-device.md: What stays unsupported)\n",
            what_, function, status_);
    }
}

void copy_text(const char* text, char* buffer, std::size_t size) {
    if (buffer == nullptr || size == 0) {
        return;
    }
    const std::size_t length = std::min(std::strlen(text), size - 1);
    std::memcpy(buffer, text, length);
    buffer[length] = '\0';
}

bool read_version_property(int type, Version version, int* value) {
    if (value == nullptr) {
        return false;
    }
    switch (type) {
    case 0: // MAJOR_VERSION
        *value = version.major;
        return true;
    case 1: // MINOR_VERSION
        *value = version.minor;
        return true;
    case 2: // PATCH_LEVEL
        *value = version.patch;
        return true;
    default:
        return false;
    }
}

} // namespace gpuleak::sim
