// cuda12_program <log> <path>: a program built for CUDA 12, linked against the simulated libcudart.so.12
// (its imports are cudaMalloc@libcudart.so.12 and so on), as most PyTorch, JAX and TensorFlow installs
// are. It allocates and frees through <path>:
//   symbol                            cudaMalloc/cudaFree, cudaMallocAsync/cudaFreeAsync and
//                                     cudaMallocHost/cudaFreeHost, called by name
//   dlsym_handle                      the same functions from dlsym on dlopen("libcudart.so.12")
//   cudaGetDriverEntryPoint           cuMemAlloc/cuMemFree as the runtime hands them out
//   cudaGetDriverEntryPointByVersion  the same, asked for at CUDA 12.0
// Each call goes to the log in api_families' form, "<op> <symbol> key=value..."; stdout gets the
// runtime's version and a count, which must not change under gpuleak. Runs on the second simulated
// device (GPULEAK_SIM_DEVICES=2), so that a recorder charging everything to device 0 is caught.
#include <dlfcn.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string_view>

#include "allocation_log.h"
#include "cuda_declarations.h"

extern "C" cudaError_t cudaRuntimeGetVersion(int* runtimeVersion);

namespace {

constexpr int kDevice = 1;
constexpr unsigned int kCuda120 = 12000;

// Sizes no other call uses: an event attributed to the wrong call cannot match by accident.
constexpr size_t kDeviceBytes = 49153;
constexpr size_t kPoolBytes = 49154;
constexpr size_t kPinnedBytes = 49155;
constexpr size_t kDriverBytes = 49156;

constexpr std::string_view kPaths[] = {"symbol", "dlsym_handle", "cudaGetDriverEntryPoint",
                                       "cudaGetDriverEntryPointByVersion"};

class Program {
  public:
    Program(std::string_view path, const AllocationLog& log) : path_(path), log_(log) {}

    int run() {
        int version = 0;
        check(cudaRuntimeGetVersion(&version), "cudaRuntimeGetVersion");
        check(cudaSetDevice(kDevice), "cudaSetDevice");
        check(cudaStreamCreate(&stream_), "cudaStreamCreate");
        if (path_ == "symbol" || path_ == "dlsym_handle")
            runtime_families();
        else
            driver_family();
        check(cudaStreamDestroy(stream_), "cudaStreamDestroy");
        std::printf("cuda12_program %.*s: runtime %d, %d allocations, %d frees\n",
                    static_cast<int>(path_.size()), path_.data(), version, allocations_, frees_);
        return 0;
    }

  private:
    void check(int rc, const char* call) const {
        log_.line("call %s rc=%d", call, rc);
        if (rc != 0)
            std::exit(1);
    }

    // A function of the runtime, by name or from dlsym on the runtime's handle.
    template <class Function> Function runtime_function(Function exported, const char* symbol) {
        if (path_ == "symbol")
            return exported;
        if (runtime_ == nullptr)
            runtime_ = dlopen("libcudart.so.12", RTLD_NOW | RTLD_LOCAL);
        void* found = runtime_ == nullptr ? nullptr : dlsym(runtime_, symbol);
        if (found == nullptr) {
            log_.line("missing %s", symbol);
            std::exit(1);
        }
        return reinterpret_cast<Function>(found);
    }

    void* driver_function(const char* base) const {
        void* found = nullptr;
        cudaDriverEntryPointQueryResult status = -1;
        const int rc =
            path_ == "cudaGetDriverEntryPoint"
                ? cudaGetDriverEntryPoint(base, &found, cudaEnableDefault, &status)
                : cudaGetDriverEntryPointByVersion(base, &found, kCuda120, cudaEnableDefault, &status);
        log_.line("call %.*s base=%s rc=%d status=%d found=%d", static_cast<int>(path_.size()), path_.data(),
                  base, rc, status, found != nullptr);
        if (found == nullptr)
            std::exit(1);
        return found;
    }

    void log_alloc(const char* symbol, int rc, unsigned long long address, size_t size, cudaStream_t stream) {
        log_.line("alloc %s rc=%d address=0x%llx size=%zu requested=%zu stream=0x%llx", symbol, rc, address,
                  size, size, AllocationLog::address(stream));
        allocations_ += rc == 0;
    }

    void log_free(const char* symbol, int rc, unsigned long long address, cudaStream_t stream) {
        log_.line("free %s rc=%d address=0x%llx size=0 stream=0x%llx", symbol, rc, address,
                  AllocationLog::address(stream));
        frees_ += rc == 0;
    }

    void runtime_families() {
        const auto malloc_device = runtime_function(&cudaMalloc, "cudaMalloc");
        const auto free_device = runtime_function(&cudaFree, "cudaFree");
        void* device = nullptr;
        int rc = malloc_device(&device, kDeviceBytes);
        log_alloc("cudaMalloc", rc, AllocationLog::address(device), kDeviceBytes, nullptr);
        log_free("cudaFree", free_device(device), AllocationLog::address(device), nullptr);

        const auto malloc_async = runtime_function(&cudaMallocAsync, "cudaMallocAsync");
        const auto free_async = runtime_function(&cudaFreeAsync, "cudaFreeAsync");
        void* pooled = nullptr;
        rc = malloc_async(&pooled, kPoolBytes, stream_);
        log_alloc("cudaMallocAsync", rc, AllocationLog::address(pooled), kPoolBytes, stream_);
        log_free("cudaFreeAsync", free_async(pooled, stream_), AllocationLog::address(pooled), stream_);

        const auto malloc_host = runtime_function(&cudaMallocHost, "cudaMallocHost");
        const auto free_host = runtime_function(&cudaFreeHost, "cudaFreeHost");
        void* pinned = nullptr;
        rc = malloc_host(&pinned, kPinnedBytes);
        log_alloc("cudaMallocHost", rc, AllocationLog::address(pinned), kPinnedBytes, nullptr);
        log_free("cudaFreeHost", free_host(pinned), AllocationLog::address(pinned), nullptr);
    }

    void driver_family() {
        const auto mem_alloc = reinterpret_cast<decltype(&cuMemAlloc_v2)>(driver_function("cuMemAlloc"));
        const auto mem_free = reinterpret_cast<decltype(&cuMemFree_v2)>(driver_function("cuMemFree"));
        CUdeviceptr device = 0;
        const int rc = mem_alloc(&device, kDriverBytes);
        log_alloc("cuMemAlloc_v2", rc, device, kDriverBytes, nullptr);
        log_free("cuMemFree_v2", mem_free(device), device, nullptr);
    }

    std::string_view path_;
    const AllocationLog& log_;
    cudaStream_t stream_ = nullptr;
    void* runtime_ = nullptr;
    int allocations_ = 0;
    int frees_ = 0;
};

} // namespace

int main(int argc, char** argv) {
    if (argc < 3) {
        std::fprintf(stderr, "usage: cuda12_program <log> <path>\n");
        return 2;
    }
    const AllocationLog log(argv[1]);
    const std::string_view wanted = argv[2];
    for (const std::string_view path : kPaths)
        if (path == wanted)
            return Program(path, log).run();
    std::fprintf(stderr, "cuda12_program: unknown path '%s'\n", argv[2]);
    return 2;
}
