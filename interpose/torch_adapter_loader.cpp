#include "torch_adapter_loader.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dlfcn.h>
#include <fcntl.h>
#include <link.h>
#include <unistd.h>

#include "config.h"
#include "loaded_object.h"
#include "real_functions.h"

namespace gpuleak {

constinit std::atomic<bool> g_torch_adapter_waiting{true};

namespace {

// What gpuleak_torch_adapter_attach_v1 returns (torch_adapter/gpuleak_torch_adapter.cpp).
enum AttachResult : int { kAttached = 0, kNotInitialized = 1, kOtherBackend = 2 };
using AttachFunction = int (*)();

constexpr char kLibraryName[] = "libc10_cuda.so";
constexpr char kAttachSymbol[] = "gpuleak_torch_adapter_attach_v1";

// One thread attaches at a time; the others (other devices' allocators, holding their own locks) go
// on unrecorded by the adapter rather than wait, so no lock order arises between them.
constinit std::atomic<bool> g_attaching{false};
// The adapter once dlopen'ed, kept for a retry when the allocator was not initialized yet.
AttachFunction g_attach = nullptr;

bool is_libc10_cuda(const char* path) {
    const char* slash = std::strrchr(path, '/');
    const char* name = slash != nullptr ? slash + 1 : path;
    return std::strncmp(name, kLibraryName, sizeof kLibraryName - 1) == 0;
}

struct BuildIdSearch {
    const link_map* map;
    char hex[2 * 64 + 1];
};

int find_build_id_of(dl_phdr_info* info, size_t, void* data) {
    auto& search = *static_cast<BuildIdSearch*>(data);
    if (info->dlpi_addr != search.map->l_addr || std::strcmp(info->dlpi_name, search.map->l_name) != 0)
        return 0;
    uint8_t id[64];
    const uint32_t length = find_build_id(info, id, sizeof id);
    for (uint32_t i = 0; i < length; ++i)
        std::snprintf(search.hex + size_t{2} * i, 3, "%02x", id[i]);
    return 1;
}

// torch's version as torch/version.py spells it (`__version__ = '2.11.0+cu130'`), read beside the
// library (torch/lib/libc10_cuda.so) as a file: Python is not to be entered from a hook.
bool read_torch_version(const char* library_path, char* out, size_t capacity) {
    char path[4096];
    const char* slash = std::strrchr(library_path, '/');
    const int directory = slash != nullptr ? static_cast<int>(slash - library_path) : 0;
    if (std::snprintf(path, sizeof path, "%.*s/../version.py", directory, library_path) >=
        static_cast<int>(sizeof path))
        return false;
    const int fd = ::open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return false;
    char text[4096];
    const ssize_t length = ::read(fd, text, sizeof text - 1);
    ::close(fd);
    if (length <= 0)
        return false;
    text[length] = '\0';
    const char* start = std::strstr(text, "__version__ = '");
    if (start == nullptr)
        return false;
    start += std::strlen("__version__ = '");
    const char* end = std::strchr(start, '\'');
    if (end == nullptr || static_cast<size_t>(end - start) >= capacity)
        return false;
    std::memcpy(out, start, static_cast<size_t>(end - start));
    out[end - start] = '\0';
    return true;
}

// <cache>/torch-<version>-<build id>/libgpuleak_torch.so, as torch_adapter/build-adapter.sh writes it.
bool adapter_path(const char* version, const char* build_id, char* out, size_t capacity) {
    const char* cache = std::getenv("GPULEAK_TORCH_ADAPTER_DIR");
    const char* xdg = std::getenv("XDG_CACHE_HOME");
    const char* home = std::getenv("HOME");
    int length = 0;
    if (cache != nullptr && cache[0] != '\0')
        length = std::snprintf(out, capacity, "%s", cache);
    else if (xdg != nullptr && xdg[0] != '\0')
        length = std::snprintf(out, capacity, "%s/gpuleak/torch-adapter", xdg);
    else if (home != nullptr && home[0] != '\0')
        length = std::snprintf(out, capacity, "%s/.cache/gpuleak/torch-adapter", home);
    else
        return false;
    if (length < 0 || static_cast<size_t>(length) >= capacity)
        return false;
    const int more = std::snprintf(out + length, capacity - static_cast<size_t>(length),
                                   "/torch-%s-%s/libgpuleak_torch.so", version, build_id);
    return more >= 0 && static_cast<size_t>(more) < capacity - static_cast<size_t>(length);
}

// GPULEAK_TORCH: 0 leaves PyTorch to segment-level recording.
bool adapter_wanted() {
    const char* setting = std::getenv("GPULEAK_TORCH");
    if (setting == nullptr || setting[0] == '\0' || std::strcmp(setting, "1") == 0)
        return true;
    if (std::strcmp(setting, "0") == 0)
        return false;
    warn("GPULEAK_TORCH=%s is not 0 or 1; using 1", setting);
    return true;
}

// Finds and dlopens the adapter for the libc10_cuda.so at `map`; nullptr, after one warning, when
// there is none or it does not load. Without it the run goes on recording segments only.
AttachFunction load_adapter(const link_map* map) {
    char version[128];
    BuildIdSearch search{map, {}};
    dl_iterate_phdr(find_build_id_of, &search);
    if (!read_torch_version(map->l_name, version, sizeof version) || search.hex[0] == '\0') {
        warn("cannot tell which PyTorch %s is (no torch/version.py beside it or no build id); "
             "recording its memory per segment only, not per tensor",
             map->l_name);
        return nullptr;
    }
    char path[4096];
    if (!adapter_path(version, search.hex, path, sizeof path)) {
        warn("no cache directory for the PyTorch adapter (set GPULEAK_TORCH_ADAPTER_DIR); recording "
             "PyTorch's memory per segment only, not per tensor");
        return nullptr;
    }
    if (::access(path, R_OK) != 0) {
        warn("no PyTorch adapter built for torch %s (%s): recording PyTorch's memory per segment only "
             "(reserved), not per tensor; build it with torch_adapter/build-adapter.sh PYTHON, PYTHON "
             "being the interpreter that imports this torch",
             version, path);
        return nullptr;
    }
    void* handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (handle == nullptr) {
        const char* error = dlerror();
        warn("cannot load the PyTorch adapter (%s); recording PyTorch's memory per segment only",
             error != nullptr ? error : path);
        return nullptr;
    }
    void* attach = real_dlsym(handle, kAttachSymbol);
    if (attach == nullptr) {
        warn("%s lacks %s (built by another gpuleak?); recording PyTorch's memory per segment only", path,
             kAttachSymbol);
        return nullptr;
    }
    return reinterpret_cast<AttachFunction>(attach);
}

// True when nothing more is to be tried in this process.
bool attach(const link_map* map) {
    if (g_attach == nullptr) {
        if (!adapter_wanted())
            return true;
        g_attach = load_adapter(map);
        if (g_attach == nullptr)
            return true;
    }
    switch (g_attach()) {
    case kAttached:
        return true;
    case kNotInitialized:
        return false; // an allocation before the caching allocator's init: try again at the next one
    case kOtherBackend:
        warn("PyTorch's CUDA allocator is not its caching allocator (PYTORCH_CUDA_ALLOC_CONF backend); "
             "recording its allocations as they reach CUDA");
        return true;
    default:
        warn("the PyTorch adapter could not attach to PyTorch's allocator; recording its memory per "
             "segment only");
        return true;
    }
}

} // namespace

void notice_allocation_caller(const void* return_address) {
    // _dl_find_object where glibc has it: cheap enough for every allocation of a program that never
    // imports torch.
    static const auto find_object =
        reinterpret_cast<FindObjectFunction>(real_dlsym(RTLD_DEFAULT, "_dl_find_object"));
    const link_map* object = object_holding(return_address, find_object);
    if (object == nullptr || !is_libc10_cuda(object->l_name))
        return;
    bool expected = false;
    if (!g_attaching.compare_exchange_strong(expected, true, std::memory_order_acquire))
        return;
    if (attach(object))
        g_torch_adapter_waiting.store(false, std::memory_order_relaxed);
    g_attaching.store(false, std::memory_order_release);
}

} // namespace gpuleak
