// Where the PyTorch adapter of one torch install lives, for libgpuleak.so, which loads it inside a traced
// process (so nothing here allocates or throws), and for the launcher, which builds it before the
// command starts. torch_adapter/build-adapter.sh writes it there.
#pragma once

#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <unistd.h>

namespace gpuleak {

// The file names carry a hash of the adapter's source (GPULEAK_TORCH_ADAPTER_HASH, computed by CMake
// as build-adapter.sh computes it): a library loads only an adapter built from its own source, and a
// newer gpuleak builds its own beside an older one's.
inline constexpr char kTorchAdapterLibrary[] = "libgpuleak_torch-" GPULEAK_TORCH_ADAPTER_HASH ".so";
// What a build that failed printed; the library's warning names it.
inline constexpr char kTorchAdapterBuildLog[] = "build-" GPULEAK_TORCH_ADAPTER_HASH ".log";

// <cache>/torch-<version>-<build id>, the build id being libc10_cuda.so's: it names the exact binary
// whose class layouts (and C++ ABI) the adapter is compiled for. The cache is GPULEAK_TORCH_ADAPTER_DIR,
// else $XDG_CACHE_HOME/gpuleak/torch-adapter, else ~/.cache/gpuleak/torch-adapter. False when there is
// no cache directory or the path does not fit.
inline bool torch_adapter_directory(const char* version, const char* build_id, char* out, size_t capacity) {
    const char* cache = std::getenv("GPULEAK_TORCH_ADAPTER_DIR");
    const char* xdg = std::getenv("XDG_CACHE_HOME");
    const char* home = std::getenv("HOME");
    int length = 0;
    if (cache != nullptr && cache[0] != '\0')
        length = std::snprintf(out, capacity, "%s/torch-%s-%s", cache, version, build_id);
    else if (xdg != nullptr && xdg[0] != '\0')
        length = std::snprintf(out, capacity, "%s/gpuleak/torch-adapter/torch-%s-%s", xdg, version, build_id);
    else if (home != nullptr && home[0] != '\0')
        length = std::snprintf(out, capacity, "%s/.cache/gpuleak/torch-adapter/torch-%s-%s", home, version,
                               build_id);
    else
        return false;
    return length >= 0 && static_cast<size_t>(length) < capacity;
}

// torch's version as torch/version.py spells it (`__version__ = '2.11.0+cu130'`), read as a file:
// Python is not to be entered from a hook, nor torch imported by the launcher (seconds).
inline bool read_torch_version(const char* version_file, char* out, size_t capacity) {
    const int fd = ::open(version_file, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return false;
    char text[4096];
    const ssize_t length = ::read(fd, text, sizeof text - 1);
    ::close(fd);
    if (length <= 0)
        return false;
    text[length] = '\0';
    constexpr char kAssignment[] = "__version__ = '";
    const char* start = std::strstr(text, kAssignment);
    if (start == nullptr)
        return false;
    start += sizeof kAssignment - 1;
    const char* end = std::strchr(start, '\'');
    if (end == nullptr || static_cast<size_t>(end - start) >= capacity)
        return false;
    std::memcpy(out, start, static_cast<size_t>(end - start));
    out[end - start] = '\0';
    return true;
}

} // namespace gpuleak
