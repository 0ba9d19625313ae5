#include "hooks/torch_adapter_loader.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dlfcn.h>
#include <link.h>
#include <unistd.h>

#include "common/warning.h"
#include "gpuleak/adapter_api.h"
#include "gpuleak/torch_adapter_path.h"
#include "hooks/real_functions.h"
#include "recording/loaded_object.h"

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
    char version_file[4096];
    // torch/lib/libc10_cuda.so: torch/version.py is beside lib/.
    const char* slash = std::strrchr(map->l_name, '/');
    const int lib_directory = slash != nullptr ? static_cast<int>(slash - map->l_name) : 0;
    const int length =
        std::snprintf(version_file, sizeof version_file, "%.*s/../version.py", lib_directory, map->l_name);
    BuildIdSearch search{map, {}};
    dl_iterate_phdr(find_build_id_of, &search);
    if (length < 0 || static_cast<size_t>(length) >= sizeof version_file ||
        !read_torch_version(version_file, version, sizeof version) || search.hex[0] == '\0') {
        warn("cannot tell which PyTorch %s is (no torch/version.py beside it or no build id); "
             "recording its memory per segment only, not per tensor",
             map->l_name);
        return nullptr;
    }
    char directory[4096];
    char path[4096 + sizeof kTorchAdapterLibrary + 1];
    if (!torch_adapter_directory(version, search.hex, directory, sizeof directory)) {
        warn("no cache directory for the PyTorch adapter (set GPULEAK_TORCH_ADAPTER_DIR); recording "
             "PyTorch's memory per segment only, not per tensor");
        return nullptr;
    }
    std::snprintf(path, sizeof path, "%s/%s", directory, kTorchAdapterLibrary);
    if (::access(path, R_OK) != 0) {
        char log[4096 + sizeof kTorchAdapterBuildLog + 1];
        std::snprintf(log, sizeof log, "%s/%s", directory, kTorchAdapterBuildLog);
        if (::access(log, R_OK) == 0)
            warn("the PyTorch adapter for torch %s could not be built (the build's output: %s): recording "
                 "PyTorch's memory per segment only (reserved), not per tensor",
                 version, log);
        else
            warn("no PyTorch adapter built for torch %s (%s): recording PyTorch's memory per segment only "
                 "(reserved), not per tensor; `gpuleak torch-adapter --python PYTHON` builds it, PYTHON "
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

void try_to_attach(const link_map* object) {
    bool expected = false;
    if (!g_attaching.compare_exchange_strong(expected, true, std::memory_order_acquire))
        return;
    if (attach(object))
        g_torch_adapter_waiting.store(false, std::memory_order_relaxed);
    g_attaching.store(false, std::memory_order_release);
}

int find_libc10_cuda(dl_phdr_info* info, size_t /*size*/, void* data) {
    if (!is_libc10_cuda(info->dlpi_name))
        return 0;
    *static_cast<const char**>(data) = info->dlpi_name;
    return 1;
}

} // namespace

void notice_allocation_caller(const void* return_address) {
    // _dl_find_object where glibc has it: cheap enough for every allocation of a program that never
    // imports torch.
    static const auto find_object =
        reinterpret_cast<FindObjectFunction>(real_dlsym(RTLD_DEFAULT, "_dl_find_object"));
    const link_map* object = object_holding(return_address, find_object);
    if (object != nullptr && is_libc10_cuda(object->l_name))
        try_to_attach(object);
}

void attach_to_loaded_torch() {
    const char* path = nullptr;
    if (!torch_adapter_waiting() || dl_iterate_phdr(find_libc10_cuda, &path) == 0 || path == nullptr)
        return;
    void* handle = dlopen(path, RTLD_NOLOAD | RTLD_LAZY);
    if (handle == nullptr)
        return;
    link_map* object = nullptr;
    if (dlinfo(handle, RTLD_DI_LINKMAP, &object) == 0 && object != nullptr)
        try_to_attach(object);
    dlclose(handle);
}

} // namespace gpuleak

__attribute__((visibility("default"))) void gpuleak_adapter_warning(const char* text) {
    if (text != nullptr)
        gpuleak::warn("%s", text);
}
