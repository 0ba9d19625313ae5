// cuda_library_probe <log> <cudnn library> [<cublas library>]: dlopens NVIDIA's cuDNN (and cuBLAS) and
// asks them questions that need no GPU. cuDNN 9 finds its sub-libraries with dlopen and dlsym on the
// first call; a dlsym hook that fell back to the default search recursed forever there (HAMi-core).
#include <dlfcn.h>

#include <cstddef>
#include <cstdio>

#include "allocation_log.h"

namespace {

template <class Function> Function look_up(void* library, const char* name) {
    return reinterpret_cast<Function>(library == nullptr ? nullptr : dlsym(library, name));
}

void probe_cudnn(const AllocationLog& log, const char* path) {
    void* cudnn = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    log.line("call dlopen library=cudnn found=%d", cudnn != nullptr);
    const auto version = look_up<size_t (*)()>(cudnn, "cudnnGetVersion");
    log.line("call cudnnGetVersion found=%d version=%zu", version != nullptr,
             version == nullptr ? 0 : version());
    const auto cudart_version = look_up<size_t (*)()>(cudnn, "cudnnGetCudartVersion");
    log.line("call cudnnGetCudartVersion found=%d version=%zu", cudart_version != nullptr,
             cudart_version == nullptr ? 0 : cudart_version());
    // Without a usable GPU this fails, the same way with and without gpuleak.
    const auto create = look_up<int (*)(void**)>(cudnn, "cudnnCreate");
    const auto destroy = look_up<int (*)(void*)>(cudnn, "cudnnDestroy");
    void* handle = nullptr;
    const int rc = create == nullptr ? -1 : create(&handle);
    log.line("call cudnnCreate found=%d rc=%d", create != nullptr, rc);
    if (rc == 0 && destroy != nullptr)
        destroy(handle);
}

void probe_cublas(const AllocationLog& log, const char* path) {
    void* cublas = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    log.line("call dlopen library=cublas found=%d", cublas != nullptr);
    const auto get_version = look_up<int (*)(void*, int*)>(cublas, "cublasGetVersion_v2");
    int version = 0;
    const int rc = get_version == nullptr ? -1 : get_version(nullptr, &version);
    log.line("call cublasGetVersion_v2 found=%d rc=%d version=%d", get_version != nullptr, rc, version);
}

} // namespace

int main(int argc, char** argv) {
    if (argc < 3) {
        std::fprintf(stderr, "usage: cuda_library_probe <log> <cudnn library> [<cublas library>]\n");
        return 2;
    }
    const AllocationLog log(argv[1]);
    probe_cudnn(log, argv[2]);
    if (argc > 3)
        probe_cublas(log, argv[3]);
    return 0;
}
