// For test_attach.py: device memory made and freed through a native library, as a C extension (CuPy,
// a custom op) calls CUDA: through its PLT, which gpuleak attach redirects in a running program.
#include <cstddef>

extern "C" int cudaMalloc(void** pointer, size_t size);
extern "C" int cudaFree(void* pointer);

extern "C" __attribute__((visibility("default"))) void* allocate(size_t size) {
    void* pointer = nullptr;
    return cudaMalloc(&pointer, size) == 0 ? pointer : nullptr;
}

extern "C" __attribute__((visibility("default"))) void release(void* pointer) {
    cudaFree(pointer);
}
