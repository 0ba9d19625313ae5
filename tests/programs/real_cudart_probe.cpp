// real_cudart_probe <log>: one cudaMalloc through NVIDIA's own libcudart.so.13, which this program is
// linked against. Without a driver it fails (cudaErrorInsufficientDriver or cudaErrorNoDevice); the
// code and the untouched out-parameter must be what the program sees with and without gpuleak.
#include <cstdint>
#include <cstdio>

#include "allocation_log.h"
#include "cuda_declarations.h"

int main(int argc, char** argv) {
    if (argc < 2) {
        std::fprintf(stderr, "usage: real_cudart_probe <log>\n");
        return 2;
    }
    const AllocationLog log(argv[1]);
    constexpr uintptr_t kUntouched = 0x5ca1ab1e;
    constexpr size_t kSize = 1 << 20;
    void* pointer = reinterpret_cast<void*>(kUntouched);
    const int rc = cudaMalloc(&pointer, kSize);
    log.line("alloc cudaMalloc rc=%d address=%#llx size=%zu requested=%zu stream=0x0 out=%s", rc,
             AllocationLog::address(pointer), rc == 0 ? kSize : 0, kSize,
             reinterpret_cast<uintptr_t>(pointer) == kUntouched ? "unchanged" : "changed");
    log.line("call cudaGetLastError rc=%d", cudaGetLastError());
    if (rc == 0)
        log.line("free cudaFree rc=%d address=%#llx size=0 stream=0x0", cudaFree(pointer),
                 AllocationLog::address(pointer));
    return 0;
}
