// The simulated CUDA device (simdevice), loaded the way a CUDA program loads the real libraries.
// ctest runs these with GPULEAK_SIM_DEVICES=2 and GPULEAK_SIM_CAPACITY=64MiB
// (simdevice/tests/CMakeLists.txt).
#include <catch2/catch.hpp>

#include "driver_api.h"
#include "runtime_api.h"
#include "sim_config.h"

#include <cstdlib>
#include <cstring>
#include <dlfcn.h>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

namespace {

constexpr int kDevices = 2;
constexpr std::size_t kCapacity = std::size_t{64} << 20;
constexpr std::size_t kMiB = std::size_t{1} << 20;
constexpr std::size_t kGranularity = 2 * kMiB;
constexpr CUresult kNotSet = -1;

class Simulator {
  public:
    Simulator() {
        // The driver first, by path, so that the runtime's dlopen("libcuda.so.1") finds it already loaded
        // whatever the library search path holds.
        driver_ = dlopen(GPULEAK_SIM_CUDA, RTLD_NOW | RTLD_LOCAL);
        runtime_ = dlopen(GPULEAK_SIM_CUDART, RTLD_NOW | RTLD_LOCAL);
    }

    void* driver() const { return driver_; }
    void* runtime() const { return runtime_; }

    template <typename Function> Function runtime_function(const char* name) const {
        return reinterpret_cast<Function>(dlsym(runtime_, name));
    }
    template <typename Function> Function driver_function(const char* name) const {
        return reinterpret_cast<Function>(dlsym(driver_, name));
    }

  private:
    void* driver_;
    void* runtime_;
};

bool environment_is(const char* name, std::string_view value) {
    const char* set = std::getenv(name);
    return set != nullptr && set == value;
}

const Simulator& sim() {
    INFO("run through ctest, which sets GPULEAK_SIM_DEVICES=2 and GPULEAK_SIM_CAPACITY=64MiB");
    REQUIRE(environment_is("GPULEAK_SIM_DEVICES", "2"));
    REQUIRE(environment_is("GPULEAK_SIM_CAPACITY", "64MiB"));
    static const Simulator simulator;
    REQUIRE(simulator.driver() != nullptr);
    REQUIRE(simulator.runtime() != nullptr);
    return simulator;
}

// The simulator's definition of a runtime or driver function, typed after our declaration of it.
#define RT(name) (sim().runtime_function<decltype(&name)>(#name))
#define CU(name) (sim().driver_function<decltype(&name)>(#name))

void* driver_symbol(const char* name) {
    return dlsym(sim().driver(), name);
}

// Free device memory as the runtime reports it for the calling thread's device.
std::size_t free_memory() {
    std::size_t free = 0;
    std::size_t total = 0;
    REQUIRE(RT(cudaMemGetInfo)(&free, &total) == cudaSuccess);
    CHECK(total == kCapacity);
    return free;
}

// Tests leave device 0 selected, whatever they switch to.
struct OnDevice {
    explicit OnDevice(int device) { REQUIRE(RT(cudaSetDevice)(device) == cudaSuccess); }
    ~OnDevice() { RT(cudaSetDevice)(0); }
};

struct TableRow {
    bool runtime;
    const char* symbol;
    const char* base;
    int since;
    bool per_thread;
};

constexpr TableRow kTableRows[] = {
#define GPULEAK_SIM_ROW_RUNTIME(sym, base, since, streams, params)                                           \
    {true, #sym, #base, since, std::string_view(#streams) == "PER_THREAD_STREAM"},
#define GPULEAK_SIM_ROW_DRIVER(sym, base, since, streams, params)                                            \
    {false, #sym, #base, since, std::string_view(#streams) == "PER_THREAD_STREAM"},
#include "entry_point_rows.inc"
};

} // namespace

TEST_CASE("configuration values are parsed strictly") {
    using gpuleak::sim::parse_capacity;
    using gpuleak::sim::parse_device_count;

    CHECK(parse_device_count("1") == 1);
    CHECK(parse_device_count("8") == 8);
    for (const char* bad : {"", "0", "9", "-1", "2x", " 2", "two"}) {
        CHECK_FALSE(parse_device_count(bad).has_value());
    }

    CHECK(parse_capacity("4096") == std::size_t{4096});
    CHECK(parse_capacity("4K") == std::size_t{4096});
    CHECK(parse_capacity("64MiB") == 64 * kMiB);
    CHECK(parse_capacity("3M") == 3 * kMiB);
    CHECK(parse_capacity("16G") == std::size_t{16} << 30);
    CHECK(parse_capacity("2GiB") == std::size_t{2} << 30);
    for (const char* bad : {"", "0", "0G", "G", "12TB", "1.5G", "-4G", "64 MiB", "99999999999999999999G"}) {
        CHECK_FALSE(parse_capacity(bad).has_value());
    }

    CHECK(gpuleak::sim::describe_config({1, std::size_t{16} << 30, false}) == "1 device x 16.0 GiB");
    CHECK(gpuleak::sim::describe_config({2, 64 * kMiB, false}) == "2 devices x 64.0 MiB");
}

TEST_CASE("the libraries identify as the simulator and export like the real ones") {
    const Simulator& s = sim();
    for (void* library : {s.driver(), s.runtime()}) {
        const auto* marker = static_cast<const char*>(dlsym(library, "gpuleak_simulated_device"));
        REQUIRE(marker != nullptr);
        CHECK(std::string(marker) == "gpuleak simulated CUDA device");
    }
    // Programs linked against the real runtime ask for cudaMalloc@@libcudart.so.13.
    CHECK(dlvsym(s.runtime(), "cudaMalloc", "libcudart.so.13") != nullptr);
    // The runtime reaches the driver only through dlopen, and internals stay hidden.
    CHECK(dlsym(s.runtime(), "cuMemAlloc_v2") == nullptr);
    CHECK(dlsym(s.driver(), "_ZN7gpuleak3sim18initialize_devicesEv") == nullptr);

    REQUIRE(CU(cuInit)(0) == CUDA_SUCCESS);
    char name[128] = {};
    REQUIRE(CU(cuDeviceGetName)(name, sizeof name, 0) == CUDA_SUCCESS);
    CHECK(std::string_view(name).find("gpuleak simulated device") != std::string_view::npos);
    int count = 0;
    REQUIRE(RT(cudaGetDeviceCount)(&count) == cudaSuccess);
    REQUIRE(count == kDevices); // ctest sets GPULEAK_SIM_DEVICES=2
}

TEST_CASE("every entry point gpuleak intercepts exists with its version and stream mode") {
    const Simulator& s = sim();
    const auto get_proc_address = CU(cuGetProcAddress_v2);
    for (const TableRow& row : kTableRows) {
        INFO(row.symbol);
        if (row.runtime) {
            CHECK(dlvsym(s.runtime(), row.symbol, "libcudart.so.13") != nullptr);
            continue;
        }
        void* exported = driver_symbol(row.symbol);
        REQUIRE(exported != nullptr);
        void* found = nullptr;
        CUdriverProcAddressQueryResult status = kNotSet;
        const cuuint64_t flags = row.per_thread ? CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM
                                                : CU_GET_PROC_ADDRESS_LEGACY_STREAM;
        CHECK(get_proc_address(row.base, &found, row.since, flags, &status) == CUDA_SUCCESS);
        CHECK(found == exported);
        CHECK(status == CU_GET_PROC_ADDRESS_SUCCESS);
    }
}

TEST_CASE("cuGetProcAddress_v2 honours version, stream mode and unknown names") {
    const auto get_proc_address = CU(cuGetProcAddress_v2);
    void* found = nullptr;
    CUdriverProcAddressQueryResult status = kNotSet;

    SECTION("the newest symbol the version allows") {
        CHECK(get_proc_address("cuMemAlloc", &found, 13000, CU_GET_PROC_ADDRESS_DEFAULT, &status) ==
              CUDA_SUCCESS);
        CHECK(found == driver_symbol("cuMemAlloc_v2"));
        CHECK(status == CU_GET_PROC_ADDRESS_SUCCESS);
        CHECK(get_proc_address("cuCtxGetDevice", &found, 12080, 0, &status) == CUDA_SUCCESS);
        CHECK(found == driver_symbol("cuCtxGetDevice"));
        CHECK(get_proc_address("cuCtxGetDevice", &found, 13000, 0, &status) == CUDA_SUCCESS);
        CHECK(found == driver_symbol("cuCtxGetDevice_v2"));
    }
    SECTION("a version older than the symbol") {
        found = &status;
        CHECK(get_proc_address("cuMemAlloc", &found, 3000, 0, &status) == CUDA_ERROR_NOT_FOUND);
        CHECK(found == nullptr);
        CHECK(status == CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT);
    }
    SECTION("per-thread default stream variants") {
        CHECK(get_proc_address("cuMemAllocAsync", &found, 13000,
                               CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, &status) == CUDA_SUCCESS);
        CHECK(found == driver_symbol("cuMemAllocAsync_ptsz"));
        CHECK(get_proc_address("cuMemAllocAsync", &found, 13000, CU_GET_PROC_ADDRESS_LEGACY_STREAM,
                               &status) == CUDA_SUCCESS);
        CHECK(found == driver_symbol("cuMemAllocAsync"));
        CHECK(get_proc_address("cuMemFreeAsync", &found, 13000, CU_GET_PROC_ADDRESS_DEFAULT, &status) ==
              CUDA_SUCCESS);
        CHECK(found == driver_symbol("cuMemFreeAsync"));
        // Without a per-thread variant the one function serves both modes.
        CHECK(get_proc_address("cuMemAlloc", &found, 13000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM,
                               &status) == CUDA_SUCCESS);
        CHECK(found == driver_symbol("cuMemAlloc_v2"));
    }
    SECTION("unknown names and bad arguments") {
        found = &status;
        CHECK(get_proc_address("cuNoSuchFunction", &found, 13000, 0, &status) == CUDA_ERROR_NOT_FOUND);
        CHECK(found == nullptr);
        CHECK(status == CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND);
        // Only base names are looked up.
        CHECK(get_proc_address("cuMemAlloc_v2", &found, 13000, 0, nullptr) == CUDA_ERROR_NOT_FOUND);
        CHECK(get_proc_address("cuMemAlloc", &found, 13000, 4, &status) == CUDA_ERROR_INVALID_VALUE);
        CHECK(get_proc_address(nullptr, &found, 13000, 0, &status) == CUDA_ERROR_INVALID_VALUE);
    }
    SECTION("cuGetProcAddress itself, in both forms") {
        CHECK(get_proc_address("cuGetProcAddress", &found, 13000, 0, &status) == CUDA_SUCCESS);
        CHECK(found == driver_symbol("cuGetProcAddress_v2"));
        CHECK(get_proc_address("cuGetProcAddress", &found, 11030, 0, nullptr) == CUDA_SUCCESS);
        CHECK(found == driver_symbol("cuGetProcAddress"));
        const auto legacy = CU(cuGetProcAddress);
        CHECK(legacy("cuMemFree", &found, 12000, CU_GET_PROC_ADDRESS_LEGACY_STREAM) == CUDA_SUCCESS);
        CHECK(found == driver_symbol("cuMemFree_v2"));
    }
    SECTION("the export table is not simulated") {
        const void* table = nullptr;
        const CUuuid id{};
        CHECK(CU(cuGetExportTable)(&table, &id) == CUDA_ERROR_NOT_SUPPORTED);
    }
}

TEST_CASE("a thread's stream capture mode is the driver's, set through either library, and its own") {
    CUstreamCaptureMode mode = CU_STREAM_CAPTURE_MODE_RELAXED;
    REQUIRE(CU(cuThreadExchangeStreamCaptureMode)(&mode) == CUDA_SUCCESS);
    CHECK(mode == CU_STREAM_CAPTURE_MODE_GLOBAL); // the default
    cudaStreamCaptureMode runtime_mode = CU_STREAM_CAPTURE_MODE_THREAD_LOCAL;
    REQUIRE(RT(cudaThreadExchangeStreamCaptureMode)(&runtime_mode) == cudaSuccess);
    CHECK(runtime_mode == CU_STREAM_CAPTURE_MODE_RELAXED);
    CUstreamCaptureMode other_thread = CU_STREAM_CAPTURE_MODE_RELAXED;
    std::thread([&] { CU(cuThreadExchangeStreamCaptureMode)(&other_thread); }).join();
    CHECK(other_thread == CU_STREAM_CAPTURE_MODE_GLOBAL);
    mode = CU_STREAM_CAPTURE_MODE_GLOBAL;
    REQUIRE(CU(cuThreadExchangeStreamCaptureMode)(&mode) == CUDA_SUCCESS);
    CHECK(mode == CU_STREAM_CAPTURE_MODE_THREAD_LOCAL);
    CHECK(CU(cuThreadExchangeStreamCaptureMode)(nullptr) == CUDA_ERROR_INVALID_VALUE);
    CUstreamCaptureMode unknown = 3;
    CHECK(CU(cuThreadExchangeStreamCaptureMode)(&unknown) == CUDA_ERROR_INVALID_VALUE);
    CHECK(unknown == 3);
}

TEST_CASE("cudaGetDriverEntryPoint hands out the driver's functions") {
    void* found = nullptr;
    cudaDriverEntryPointQueryResult status = kNotSet;

    CHECK(RT(cudaGetDriverEntryPoint)("cuMemAlloc", &found, cudaEnableDefault, &status) == cudaSuccess);
    CHECK(found == driver_symbol("cuMemAlloc_v2"));
    CHECK(status == cudaDriverEntryPointSuccess);

    CHECK(RT(cudaGetDriverEntryPoint)("cuGetProcAddress", &found, cudaEnableDefault, &status) == cudaSuccess);
    CHECK(found == driver_symbol("cuGetProcAddress_v2"));

    // Code built for per-thread default streams gets the _ptsz variants by default.
    CHECK(RT(cudaGetDriverEntryPoint_ptsz)("cuMemAllocAsync", &found, cudaEnableDefault, &status) ==
          cudaSuccess);
    CHECK(found == driver_symbol("cuMemAllocAsync_ptsz"));
    CHECK(RT(cudaGetDriverEntryPoint)("cuMemAllocAsync", &found, cudaEnablePerThreadDefaultStream, &status) ==
          cudaSuccess);
    CHECK(found == driver_symbol("cuMemAllocAsync_ptsz"));
    CHECK(RT(cudaGetDriverEntryPointByVersion_ptsz)("cuMemFreeAsync", &found, 12000, cudaEnableLegacyStream,
                                                    &status) == cudaSuccess);
    CHECK(found == driver_symbol("cuMemFreeAsync"));

    CHECK(RT(cudaGetDriverEntryPointByVersion)("cuMemCreate", &found, 12000, cudaEnableDefault, &status) ==
          cudaSuccess);
    CHECK(found == driver_symbol("cuMemCreate"));

    // Not found is not an error: NULL and the reason.
    found = &status;
    CHECK(RT(cudaGetDriverEntryPointByVersion)("cuMemAlloc", &found, 3000, cudaEnableDefault, &status) ==
          cudaSuccess);
    CHECK(found == nullptr);
    CHECK(status == cudaDriverEntryPointVersionNotSufficent);
    CHECK(RT(cudaGetDriverEntryPoint)("cuNoSuchFunction", &found, cudaEnableDefault, &status) == cudaSuccess);
    CHECK(found == nullptr);
    CHECK(status == cudaDriverEntryPointSymbolNotFound);

    CHECK(RT(cudaGetDriverEntryPointByVersion)("cuMemAlloc", &found, 14000, cudaEnableDefault, &status) ==
          cudaErrorInvalidValue);
    CHECK(RT(cudaGetDriverEntryPoint)("cuMemAlloc", &found, 7, &status) == cudaErrorInvalidValue);
    RT(cudaGetLastError)();
}

TEST_CASE("the runtime built as libcudart.so.12 speaks CUDA 12 and withholds what CUDA 13 changed") {
    const Simulator& s = sim();
    void* cuda12 = dlopen(GPULEAK_SIM_CUDART12, RTLD_NOW | RTLD_LOCAL);
    REQUIRE(cuda12 != nullptr);
    // Its definition of `name`, typed as CUDA 13's header declares it.
#define IN_CUDA12(name) reinterpret_cast<decltype(&name)>(dlsym(cuda12, #name))
    // Programs linked against CUDA 12's runtime ask for cudaMalloc@@libcudart.so.12.
    CHECK(dlvsym(cuda12, "cudaMalloc", "libcudart.so.12") != nullptr);
    CHECK(dlvsym(cuda12, "cudaMalloc", "libcudart.so.13") == nullptr);
    CHECK(dlsym(cuda12, "gpuleak_simulated_device") != nullptr);
    // CUDA 13.0 lays these out otherwise or gave them another parameter: the CUDA 12 build leaves them
    // out, and has none of the names CUDA 12's headers call them by.
    for (const char* changed : {"cudaGetDeviceProperties", "cudaPointerGetAttributes",
                                "cudaStreamGetCaptureInfo", "cudaGraphNodeGetDependencies"}) {
        INFO(changed);
        CHECK(dlsym(s.runtime(), changed) != nullptr);
        CHECK(dlsym(cuda12, changed) == nullptr);
    }
    for (const char* cuda12_only : {"cudaStreamGetCaptureInfo_v2", "cudaGraphNodeGetDependencies_v2"}) {
        INFO(cuda12_only);
        CHECK(dlsym(cuda12, cuda12_only) == nullptr);
    }
    // What CUDA 12's headers call cudaGetDeviceProperties (TensorFlow's Eigen kernels size their launches
    // from it), filled in CUDA 12's layout; CUDA 13's runtime has no such name.
    CHECK(dlsym(s.runtime(), "cudaGetDeviceProperties_v2") == nullptr);
    cuda12::cudaDeviceProp prop12{};
    CHECK(IN_CUDA12(cudaGetDeviceProperties_v2)(&prop12, 0) == cudaSuccess);
    cudaDeviceProp prop13{};
    CHECK(RT(cudaGetDeviceProperties)(&prop13, 0) == cudaSuccess);
    CHECK(std::string(prop12.name) == prop13.name);
    CHECK(prop12.totalGlobalMem == prop13.totalGlobalMem);
    CHECK(prop12.major == 9);
    CHECK(prop12.multiProcessorCount == prop13.multiProcessorCount);
    CHECK(prop12.sharedMemPerBlockOptin == prop13.sharedMemPerBlockOptin);
    CHECK(prop12.memoryPoolsSupported == 1);
    CHECK(prop12.clockRate > 0);
    CHECK(prop12.memoryClockRate > 0);
    CHECK(IN_CUDA12(cudaGetDeviceProperties_v2)(nullptr, 0) == cudaErrorInvalidValue);
    IN_CUDA12(cudaGetLastError)();

    int version = 0;
    CHECK(IN_CUDA12(cudaRuntimeGetVersion)(&version) == cudaSuccess);
    CHECK(version == 12080);
    // It asks the driver for CUDA 12's functions: cuCtxSynchronize without CUDA 13's context parameter.
    void* found = nullptr;
    cudaDriverEntryPointQueryResult status = kNotSet;
    CHECK(IN_CUDA12(cudaGetDriverEntryPoint)("cuCtxSynchronize", &found, cudaEnableDefault, &status) ==
          cudaSuccess);
    CHECK(found == driver_symbol("cuCtxSynchronize"));
    CHECK(RT(cudaGetDriverEntryPoint)("cuCtxSynchronize", &found, cudaEnableDefault, &status) == cudaSuccess);
    CHECK(found == driver_symbol("cuCtxSynchronize_v2"));
    CHECK(IN_CUDA12(cudaDeviceSynchronize)() == cudaSuccess);
#undef IN_CUDA12
}

TEST_CASE("exceeding a device's capacity fails like a GPU, leaving the out-parameter untouched") {
    const OnDevice device(0);
    const std::size_t before = free_memory();
    REQUIRE(before == kCapacity); // ctest sets GPULEAK_SIM_CAPACITY=64MiB

    int marker = 0;
    void* const sentinel = &marker;
    void* pointer = sentinel;
    CHECK(RT(cudaMalloc)(&pointer, kCapacity + 1) == cudaErrorMemoryAllocation);
    CHECK(pointer == sentinel);
    CHECK(free_memory() == before);

    void* big = nullptr;
    REQUIRE(RT(cudaMalloc)(&big, 40 * kMiB) == cudaSuccess);
    CHECK(free_memory() == before - 40 * kMiB);
    // The simulated memory is real host memory.
    std::memset(big, 0xab, 40 * kMiB);

    CHECK(RT(cudaMalloc)(&pointer, 30 * kMiB) == cudaErrorMemoryAllocation);
    CHECK(pointer == sentinel);
    CUdeviceptr driver_pointer = 42;
    CHECK(CU(cuMemAlloc_v2)(&driver_pointer, 30 * kMiB) == CUDA_ERROR_OUT_OF_MEMORY);
    CHECK(driver_pointer == 42);
    CHECK(free_memory() == before - 40 * kMiB);

    // The failures are the thread's last error until read.
    CHECK(RT(cudaPeekAtLastError)() == cudaErrorMemoryAllocation);
    CHECK(RT(cudaGetLastError)() == cudaErrorMemoryAllocation);
    CHECK(RT(cudaGetLastError)() == cudaSuccess);

    REQUIRE(RT(cudaFree)(big) == cudaSuccess);
    CHECK(free_memory() == before);
    CHECK(RT(cudaGetLastError)() == cudaSuccess);
}

TEST_CASE("each device has its own capacity") {
    void* first = nullptr;
    void* second = nullptr;
    void* third = nullptr;
    {
        const OnDevice device(0);
        REQUIRE(RT(cudaMalloc)(&first, 48 * kMiB) == cudaSuccess);
    }
    {
        const OnDevice device(1);
        int current = -1;
        REQUIRE(RT(cudaGetDevice)(&current) == cudaSuccess);
        CHECK(current == 1);
        CUdevice context_device = -1;
        REQUIRE(CU(cuCtxGetDevice)(&context_device) == CUDA_SUCCESS);
        CHECK(context_device == 1);
        CHECK(free_memory() == kCapacity);
        REQUIRE(RT(cudaMalloc)(&second, 48 * kMiB) == cudaSuccess);
        CHECK(free_memory() == kCapacity - 48 * kMiB);
    }
    CHECK(RT(cudaMalloc)(&third, 48 * kMiB) == cudaErrorMemoryAllocation);
    CHECK(free_memory() == kCapacity - 48 * kMiB);
    CHECK(RT(cudaSetDevice)(kDevices) == cudaErrorInvalidDevice);

    // A free goes back to the device the memory came from, whichever device is current.
    REQUIRE(RT(cudaFree)(second) == cudaSuccess);
    REQUIRE(RT(cudaFree)(first) == cudaSuccess);
    CHECK(free_memory() == kCapacity);
    {
        const OnDevice device(1);
        CHECK(free_memory() == kCapacity);
    }
    RT(cudaGetLastError)();
}

TEST_CASE("a thread's first runtime call makes device 0's primary context current") {
    REQUIRE(CU(cuInit)(0) == CUDA_SUCCESS);
    const auto get_device = CU(cuCtxGetDevice);
    const auto runtime_free = RT(cudaFree);
    CUresult before = kNotSet;
    cudaError_t first_call = kNotSet;
    CUresult after = kNotSet;
    CUdevice device = -1;
    // Catch's assertions are not for other threads: the thread only collects results.
    std::thread([&] {
        CUdevice unused = -1;
        before = get_device(&unused);
        first_call = runtime_free(nullptr);
        after = get_device(&device);
    }).join();
    CHECK(before == CUDA_ERROR_INVALID_CONTEXT);
    CHECK(first_call == cudaSuccess);
    CHECK(after == CUDA_SUCCESS);
    CHECK(device == 0);
}

TEST_CASE("questions about a device make no context, as PyTorch's start asks about every device") {
    REQUIRE(CU(cuInit)(0) == CUDA_SUCCESS);
    const auto get_device = CU(cuCtxGetDevice);
    const auto properties = RT(cudaGetDeviceProperties);
    const auto attribute = RT(cudaDeviceGetAttribute);
    cudaError_t asked = kNotSet;
    cudaError_t asked_attribute = kNotSet;
    CUresult after = kNotSet;
    std::thread([&] {
        cudaDeviceProp prop{};
        int value = 0;
        asked = properties(&prop, 1);
        asked_attribute = attribute(&value, 16, 0); // CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT
        CUdevice unused = -1;
        after = get_device(&unused);
    }).join();
    CHECK(asked == cudaSuccess);
    CHECK(asked_attribute == cudaSuccess);
    CHECK(after == CUDA_ERROR_INVALID_CONTEXT);
}

TEST_CASE("allocations from several threads at once keep the books balanced") {
    const auto allocate = RT(cudaMalloc);
    const auto release = RT(cudaFree);
    constexpr int kThreads = 4;
    constexpr int kRounds = 200;
    int failures[kThreads] = {};
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
        threads.emplace_back([&, t] {
            for (int round = 0; round < kRounds; ++round) {
                void* pointer = nullptr;
                failures[t] += allocate(&pointer, (t + 1) * 64 * 1024) != cudaSuccess;
                failures[t] += release(pointer) != cudaSuccess;
            }
        });
    }
    for (std::thread& thread : threads) {
        thread.join();
    }
    for (int t = 0; t < kThreads; ++t) {
        CHECK(failures[t] == 0);
    }
    const OnDevice device(0);
    CHECK(free_memory() == kCapacity);
}

TEST_CASE("zero-byte and invalid frees behave like the real runtime") {
    const OnDevice device(0);
    void* pointer = &pointer;
    CHECK(RT(cudaMalloc)(&pointer, 0) == cudaSuccess);
    CHECK(pointer == nullptr);
    CHECK(RT(cudaFree)(nullptr) == cudaSuccess);
    CHECK(RT(cudaGetLastError)() == cudaSuccess);

    int not_device_memory = 0;
    CHECK(RT(cudaFree)(&not_device_memory) == cudaErrorInvalidValue);
    CHECK(RT(cudaGetLastError)() == cudaErrorInvalidValue);
    CHECK(CU(cuMemFree_v2)(reinterpret_cast<CUdeviceptr>(&not_device_memory)) == CUDA_ERROR_INVALID_VALUE);
    CUdeviceptr untouched = 42;
    CHECK(CU(cuMemAlloc_v2)(&untouched, 0) == CUDA_ERROR_INVALID_VALUE);
    CHECK(untouched == 42);

    void* managed = nullptr;
    CHECK(RT(cudaMallocManaged)(&managed, kMiB, 0) == cudaErrorInvalidValue);
    REQUIRE(RT(cudaMallocManaged)(&managed, kMiB, 1) == cudaSuccess);
    CHECK(free_memory() == kCapacity - kMiB);
    // Device memory is not pinned host memory.
    CHECK(RT(cudaFreeHost)(managed) == cudaErrorInvalidValue);
    CHECK(RT(cudaFree)(managed) == cudaSuccess);
    RT(cudaGetLastError)();
}

TEST_CASE("pitched and 3D allocations round rows up to 512 bytes") {
    const OnDevice device(0);
    void* pointer = nullptr;
    std::size_t pitch = 0;
    REQUIRE(RT(cudaMallocPitch)(&pointer, &pitch, 100, 10) == cudaSuccess);
    CHECK(pitch == 512);
    CHECK(free_memory() == kCapacity - 512 * 10);
    REQUIRE(RT(cudaFree)(pointer) == cudaSuccess);

    cudaPitchedPtr pitched{};
    REQUIRE(RT(cudaMalloc3D)(&pitched, cudaExtent{1000, 4, 3}) == cudaSuccess);
    CHECK(pitched.ptr != nullptr);
    CHECK(pitched.pitch == 1024);
    CHECK(pitched.xsize == 1000);
    CHECK(pitched.ysize == 4);
    CHECK(free_memory() == kCapacity - 1024 * 4 * 3);
    REQUIRE(RT(cudaFree)(pitched.ptr) == cudaSuccess);

    CUdeviceptr driver_pointer = 0;
    CHECK(CU(cuMemAllocPitch_v2)(&driver_pointer, &pitch, 100, 10, 3) == CUDA_ERROR_INVALID_VALUE);
    CHECK(free_memory() == kCapacity);
}

TEST_CASE("stream-ordered allocations are charged at once and freed at once") {
    const OnDevice device(0);
    cudaStream_t stream = nullptr;
    REQUIRE(RT(cudaStreamCreate)(&stream) == cudaSuccess);

    void* pointer = nullptr;
    REQUIRE(RT(cudaMallocAsync)(&pointer, 3 * kMiB, stream) == cudaSuccess);
    CHECK(free_memory() == kCapacity - 3 * kMiB);
    REQUIRE(RT(cudaFreeAsync)(pointer, stream) == cudaSuccess);
    CHECK(free_memory() == kCapacity);

    const auto per_thread_stream = reinterpret_cast<cudaStream_t>(0x2);
    REQUIRE(RT(cudaMallocAsync_ptsz)(&pointer, kMiB, per_thread_stream) == cudaSuccess);
    CHECK(free_memory() == kCapacity - kMiB);
    REQUIRE(RT(cudaFreeAsync_ptsz)(pointer, per_thread_stream) == cudaSuccess);

    // A pool's allocations are charged to the pool's device, not the current one.
    cudaMemPool_t pool = nullptr;
    REQUIRE(RT(cudaDeviceGetDefaultMemPool)(&pool, 1) == cudaSuccess);
    REQUIRE(RT(cudaMallocFromPoolAsync)(&pointer, 5 * kMiB, pool, nullptr) == cudaSuccess);
    CHECK(free_memory() == kCapacity);
    {
        const OnDevice other(1);
        CHECK(free_memory() == kCapacity - 5 * kMiB);
    }
    void* from_ptsz = nullptr;
    REQUIRE(RT(cudaMallocFromPoolAsync_ptsz)(&from_ptsz, kMiB, pool, per_thread_stream) == cudaSuccess);
    REQUIRE(RT(cudaFreeAsync)(from_ptsz, stream) == cudaSuccess);
    REQUIRE(RT(cudaFreeAsync)(pointer, stream) == cudaSuccess);
    CHECK(RT(cudaMemPoolTrimTo)(pool, 0) == cudaSuccess);
    {
        const OnDevice other(1);
        CHECK(free_memory() == kCapacity);
    }

    CHECK(RT(cudaStreamSynchronize)(stream) == cudaSuccess);
    CHECK(RT(cudaDeviceSynchronize)() == cudaSuccess);
    REQUIRE(RT(cudaStreamDestroy)(stream) == cudaSuccess);
    CHECK(RT(cudaStreamSynchronize)(stream) == CUDA_ERROR_INVALID_HANDLE);
    CHECK(RT(cudaMallocAsync)(&pointer, kMiB, stream) == CUDA_ERROR_INVALID_HANDLE);
    RT(cudaGetLastError)();
}

TEST_CASE("a pool's attributes and access are the driver's, as TensorFlow's cuda_malloc_async sets them") {
    const OnDevice device(0);
    // CUmemPool_attribute's numbers, as in cuda.h.
    constexpr int kReuseFollowEventDependencies = 1;
    constexpr int kReleaseThreshold = 4;
    constexpr int kUsedMemCurrent = 7;
    constexpr int kPastTheLast = 9;
    CUmemoryPool pool = nullptr;
    REQUIRE(CU(cuDeviceGetDefaultMemPool)(&pool, 0) == CUDA_SUCCESS);
    cuuint64_t threshold = UINT64_MAX;
    CHECK(CU(cuMemPoolSetAttribute)(pool, kReleaseThreshold, &threshold) == CUDA_SUCCESS);
    // Frees take effect at once: the pool holds nothing, every counter reads 0, a 64-bit one whole.
    cuuint64_t used = UINT64_MAX;
    CHECK(CU(cuMemPoolGetAttribute)(pool, kUsedMemCurrent, &used) == CUDA_SUCCESS);
    CHECK(used == 0);
    struct {
        int value;
        int after;
    } flag{-1, -1};
    CHECK(CU(cuMemPoolGetAttribute)(pool, kReuseFollowEventDependencies, &flag.value) == CUDA_SUCCESS);
    CHECK(flag.value == 0);
    CHECK(flag.after == -1);
    CHECK(CU(cuMemPoolGetAttribute)(pool, kPastTheLast, &used) == CUDA_ERROR_INVALID_VALUE);
    CHECK(CU(cuMemPoolSetAttribute)(nullptr, kReleaseThreshold, &threshold) == CUDA_ERROR_INVALID_VALUE);
    CUmemAccessDesc access{};
    access.location = {CU_MEM_LOCATION_TYPE_DEVICE, 1};
    access.flags = 3; // CU_MEM_ACCESS_FLAGS_PROT_READWRITE
    CHECK(CU(cuMemPoolSetAccess)(pool, &access, 1) == CUDA_SUCCESS);
    CHECK(CU(cuMemPoolSetAccess)(pool, nullptr, 1) == CUDA_ERROR_INVALID_VALUE);

    // The runtime asks the driver, as the real one does.
    CHECK(RT(cudaMemPoolSetAttribute)(pool, kReleaseThreshold, &threshold) == cudaSuccess);
    CHECK(RT(cudaMemPoolGetAttribute)(pool, kPastTheLast, &used) == cudaErrorInvalidValue);
    RT(cudaGetLastError)();
}

TEST_CASE("pinned and registered host memory are not charged to a device") {
    const OnDevice device(0);
    void* pinned = nullptr;
    REQUIRE(RT(cudaMallocHost)(&pinned, 8 * kMiB) == cudaSuccess);
    void* portable = nullptr;
    REQUIRE(RT(cudaHostAlloc)(&portable, 4096, 1) == cudaSuccess);
    CHECK(free_memory() == kCapacity);
    std::memset(pinned, 1, 8 * kMiB);
    CHECK(RT(cudaFree)(pinned) == cudaErrorInvalidValue);
    CHECK(RT(cudaFreeHost)(pinned) == cudaSuccess);
    CHECK(RT(cudaFreeHost)(portable) == cudaSuccess);

    static char buffer[8192];
    CHECK(CU(cuMemHostRegister_v2)(buffer, 4096, 0) == CUDA_SUCCESS);
    CHECK(CU(cuMemHostRegister_v2)(buffer + 100, 4096, 0) == CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED);
    CHECK(CU(cuMemHostRegister_v2)(buffer + 4096, 4096, 0) == CUDA_SUCCESS);
    CHECK(free_memory() == kCapacity);
    CHECK(CU(cuMemHostUnregister)(buffer) == CUDA_SUCCESS);
    CHECK(CU(cuMemHostUnregister)(buffer) == CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED);
    CHECK(CU(cuMemHostUnregister)(buffer + 4096) == CUDA_SUCCESS);
    RT(cudaGetLastError)();
}

TEST_CASE("virtual memory management: reserve, create, map, access, unmap, release") {
    const OnDevice device(1);
    CUmemAllocationProp prop{};
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location = {CU_MEM_LOCATION_TYPE_DEVICE, 1};
    std::size_t granularity = 0;
    REQUIRE(CU(cuMemGetAllocationGranularity)(&granularity, &prop, 0) == CUDA_SUCCESS);
    REQUIRE(granularity == kGranularity);

    CUdeviceptr reserved = 0;
    REQUIRE(CU(cuMemAddressReserve)(&reserved, 8 * kMiB, 0, 0, 0) == CUDA_SUCCESS);
    CHECK(reserved % kGranularity == 0);
    CUdeviceptr aligned = 0;
    REQUIRE(CU(cuMemAddressReserve)(&aligned, 4 * kMiB, 16 * kMiB, 0, 0) == CUDA_SUCCESS);
    CHECK(aligned % (16 * kMiB) == 0);

    CUmemGenericAllocationHandle low = 0;
    CUmemGenericAllocationHandle high = 0;
    REQUIRE(CU(cuMemCreate)(&low, 4 * kMiB, &prop, 0) == CUDA_SUCCESS);
    REQUIRE(CU(cuMemCreate)(&high, 4 * kMiB, &prop, 0) == CUDA_SUCCESS);
    CHECK(free_memory() == kCapacity - 8 * kMiB);
    CUmemGenericAllocationHandle untouched = 42;
    CHECK(CU(cuMemCreate)(&untouched, kCapacity, &prop, 0) == CUDA_ERROR_OUT_OF_MEMORY);
    CHECK(untouched == 42);

    REQUIRE(CU(cuMemMap)(reserved, 4 * kMiB, 0, low, 0) == CUDA_SUCCESS);
    REQUIRE(CU(cuMemMap)(reserved + 4 * kMiB, 4 * kMiB, 0, high, 0) == CUDA_SUCCESS);
    CHECK(CU(cuMemMap)(reserved, 4 * kMiB, 0, high, 0) == CUDA_ERROR_INVALID_VALUE); // already mapped
    CHECK(CU(cuMemMap)(reserved + 8 * kMiB, 2 * kMiB, 0, high, 0) == CUDA_ERROR_INVALID_VALUE); // outside
    // The same physical memory seen through a second mapping.
    REQUIRE(CU(cuMemMap)(aligned, 4 * kMiB, 0, low, 0) == CUDA_SUCCESS);

    const CUmemAccessDesc access{{CU_MEM_LOCATION_TYPE_DEVICE, 1}, CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
    REQUIRE(CU(cuMemSetAccess)(reserved, 8 * kMiB, &access, 1) == CUDA_SUCCESS);
    REQUIRE(CU(cuMemSetAccess)(aligned, 4 * kMiB, &access, 1) == CUDA_SUCCESS);
    auto* bytes = reinterpret_cast<unsigned char*>(reserved);
    std::memset(bytes, 0x5a, 8 * kMiB);
    bytes[123] = 7;
    CHECK(reinterpret_cast<unsigned char*>(aligned)[123] == 7);
    CHECK(bytes[8 * kMiB - 1] == 0x5a);

    CHECK(CU(cuMemAddressFree)(aligned, 4 * kMiB) == CUDA_ERROR_INVALID_VALUE); // still mapped
    CHECK(CU(cuMemUnmap)(reserved, 2 * kMiB) == CUDA_ERROR_INVALID_VALUE);      // part of a mapping
    REQUIRE(CU(cuMemUnmap)(reserved, 8 * kMiB) == CUDA_SUCCESS);                // two mappings at once
    REQUIRE(CU(cuMemUnmap)(aligned, 4 * kMiB) == CUDA_SUCCESS);

    REQUIRE(CU(cuMemRelease)(high) == CUDA_SUCCESS);
    CHECK(free_memory() == kCapacity - 4 * kMiB);
    // A released handle's memory stays charged while a mapping still holds it.
    REQUIRE(CU(cuMemMap)(reserved, 4 * kMiB, 0, low, 0) == CUDA_SUCCESS);
    REQUIRE(CU(cuMemRelease)(low) == CUDA_SUCCESS);
    CHECK(CU(cuMemRelease)(low) == CUDA_ERROR_INVALID_VALUE);
    CHECK(free_memory() == kCapacity - 4 * kMiB);
    REQUIRE(CU(cuMemUnmap)(reserved, 4 * kMiB) == CUDA_SUCCESS);
    CHECK(free_memory() == kCapacity);

    REQUIRE(CU(cuMemAddressFree)(reserved, 8 * kMiB) == CUDA_SUCCESS);
    REQUIRE(CU(cuMemAddressFree)(aligned, 4 * kMiB) == CUDA_SUCCESS);
    CHECK(CU(cuMemAddressFree)(aligned, 4 * kMiB) == CUDA_ERROR_INVALID_VALUE);
}

TEST_CASE("error names, versions and the last error") {
    CHECK(std::string(RT(cudaGetErrorName)(cudaErrorMemoryAllocation)) == "cudaErrorMemoryAllocation");
    CHECK(std::string(RT(cudaGetErrorString)(cudaErrorMemoryAllocation)) == "out of memory");
    CHECK(std::string(RT(cudaGetErrorString)(99999)) == "unrecognized error code");

    const char* text = nullptr;
    CHECK(CU(cuGetErrorName)(CUDA_ERROR_OUT_OF_MEMORY, &text) == CUDA_SUCCESS);
    CHECK(std::string(text) == "CUDA_ERROR_OUT_OF_MEMORY");
    CHECK(CU(cuGetErrorString)(99999, &text) == CUDA_ERROR_INVALID_VALUE);
    CHECK(text == nullptr);

    int version = 0;
    CHECK(RT(cudaRuntimeGetVersion)(&version) == cudaSuccess);
    CHECK(version == 13000);
    CHECK(RT(cudaDriverGetVersion)(&version) == cudaSuccess);
    CHECK(version == 13000);

    CHECK(RT(cudaSetDevice)(-1) == cudaErrorInvalidDevice);
    CHECK(RT(cudaMemGetInfo)(nullptr, nullptr) == cudaErrorInvalidValue);
    // The last error is the latest failure, kept until read.
    CHECK(RT(cudaGetDriverEntryPoint)("cuMemAlloc", nullptr, 0, nullptr) == cudaErrorInvalidValue);
    CHECK(RT(cudaPeekAtLastError)() == cudaErrorInvalidValue);
    CHECK(RT(cudaPeekAtLastError)() == cudaErrorInvalidValue);
    CHECK(RT(cudaGetLastError)() == cudaErrorInvalidValue);
    CHECK(RT(cudaGetLastError)() == cudaSuccess);
}

TEST_CASE("events are the driver's, the same through either library, complete once recorded") {
    REQUIRE(CU(cuInit)(0) == CUDA_SUCCESS);
    // A runtime call first: device 0's primary context is then current, which the driver's calls need.
    REQUIRE(RT(cudaFree)(nullptr) == cudaSuccess);
    CUevent start = nullptr;
    REQUIRE(CU(cuEventCreate)(&start, 0) == CUDA_SUCCESS);
    cudaEvent_t end = nullptr;
    REQUIRE(RT(cudaEventCreateWithFlags)(&end, 0) == cudaSuccess);
    float ms = -1;
    // Not recorded yet: complete (as on a GPU), but with no time between them.
    CHECK(CU(cuEventQuery)(start) == CUDA_SUCCESS);
    CHECK(CU(cuEventElapsedTime_v2)(&ms, start, end) == CUDA_ERROR_NOT_READY);
    CHECK(RT(cudaEventRecord)(start, nullptr) == cudaSuccess);
    CHECK(CU(cuEventRecord)(end, nullptr) == CUDA_SUCCESS);
    CHECK(RT(cudaEventSynchronize)(end) == cudaSuccess);
    CHECK(RT(cudaEventElapsedTime)(&ms, start, end) == cudaSuccess);
    CHECK(ms >= 0);
    CHECK(CU(cuStreamWaitEvent)(nullptr, end, 0) == CUDA_SUCCESS);
    CHECK(RT(cudaStreamWaitEvent)(nullptr, start, 0) == cudaSuccess);
    CHECK(CU(cuStreamWaitEvent)(nullptr, end, 2) == CUDA_ERROR_INVALID_VALUE);
    CHECK(CU(cuEventRecordWithFlags)(end, nullptr, 4) == CUDA_ERROR_INVALID_VALUE);

    // Timing switched off: no time between them, through either library.
    CUevent untimed = nullptr;
    REQUIRE(CU(cuEventCreate)(&untimed, 2) == CUDA_SUCCESS);
    CHECK(CU(cuEventRecord)(untimed, nullptr) == CUDA_SUCCESS);
    CHECK(CU(cuEventElapsedTime)(&ms, start, untimed) == CUDA_ERROR_INVALID_HANDLE);
    CHECK(CU(cuEventCreate)(&untimed, 8) == CUDA_ERROR_INVALID_VALUE);

    // Destroyed through the other library: gone for both.
    CHECK(RT(cudaEventDestroy)(start) == cudaSuccess);
    CHECK(CU(cuEventDestroy_v2)(end) == CUDA_SUCCESS);
    CHECK(CU(cuEventDestroy_v2)(untimed) == CUDA_SUCCESS);
    CHECK(CU(cuEventQuery)(start) == CUDA_ERROR_INVALID_HANDLE);
    CHECK(RT(cudaEventQuery)(end) == cudaErrorInvalidResourceHandle);
    CHECK(RT(cudaGetLastError)() == cudaErrorInvalidResourceHandle);
    CHECK(CU(cuStreamWaitEvent)(nullptr, end, 0) == CUDA_ERROR_INVALID_HANDLE);
}

namespace {

struct HostFunctionRuns {
    std::mutex mutex;
    std::vector<int> order;
    bool on_caller_thread = false;
    std::thread::id caller = std::this_thread::get_id();
};

struct HostFunctionCall {
    HostFunctionRuns* runs;
    int id;
};

void note_host_function(void* data) {
    auto* call = static_cast<HostFunctionCall*>(data);
    const std::lock_guard lock(call->runs->mutex);
    call->runs->order.push_back(call->id);
    call->runs->on_caller_thread |= std::this_thread::get_id() == call->runs->caller;
}

} // namespace

TEST_CASE("host functions are the driver's, run in order off the caller's thread, and synchronising waits") {
    REQUIRE(CU(cuInit)(0) == CUDA_SUCCESS);
    REQUIRE(RT(cudaFree)(nullptr) == cudaSuccess);
    HostFunctionRuns runs;
    HostFunctionCall calls[] = {{&runs, 1}, {&runs, 2}, {&runs, 3}, {&runs, 4}};
    const auto callback = [](CUstream, CUresult status, void* data) {
        if (status == CUDA_SUCCESS)
            note_host_function(data);
    };
    const auto runtime_callback = [](cudaStream_t, cudaError_t status, void* data) {
        if (status == cudaSuccess)
            note_host_function(data);
    };
    REQUIRE(CU(cuLaunchHostFunc)(nullptr, note_host_function, &calls[0]) == CUDA_SUCCESS);
    REQUIRE(RT(cudaLaunchHostFunc)(nullptr, note_host_function, &calls[1]) == cudaSuccess);
    REQUIRE(CU(cuStreamAddCallback)(nullptr, callback, &calls[2], 0) == CUDA_SUCCESS);
    REQUIRE(RT(cudaStreamAddCallback)(nullptr, runtime_callback, &calls[3], 0) == cudaSuccess);
    REQUIRE(RT(cudaStreamSynchronize)(nullptr) == cudaSuccess);
    {
        const std::lock_guard lock(runs.mutex);
        CHECK(runs.order == std::vector<int>{1, 2, 3, 4});
        CHECK_FALSE(runs.on_caller_thread);
    }
    HostFunctionCall fifth{&runs, 5};
    REQUIRE(CU(cuLaunchHostFunc)(nullptr, note_host_function, &fifth) == CUDA_SUCCESS);
    REQUIRE(CU(cuCtxSynchronize_v2)(nullptr) == CUDA_SUCCESS);
    {
        const std::lock_guard lock(runs.mutex);
        CHECK(runs.order.size() == 5);
    }
    CHECK(CU(cuLaunchHostFunc)(nullptr, nullptr, nullptr) == CUDA_ERROR_INVALID_VALUE);
    CHECK(CU(cuStreamAddCallback)(nullptr, callback, &fifth, 1) == CUDA_ERROR_INVALID_VALUE);
}

namespace {

template <typename Value> Value pointer_attribute(int attribute, CUdeviceptr address) {
    Value value{};
    REQUIRE(CU(cuPointerGetAttribute)(&value, attribute, address) == CUDA_SUCCESS);
    return value;
}

CUdeviceptr address_of(const void* pointer) {
    return reinterpret_cast<CUdeviceptr>(pointer);
}

} // namespace

TEST_CASE("pointer queries know the driver's memory by any address inside it, and nothing else") {
    REQUIRE(CU(cuInit)(0) == CUDA_SUCCESS);
    REQUIRE(RT(cudaFree)(nullptr) == cudaSuccess);
    CUcontext context = nullptr;
    REQUIRE(CU(cuCtxGetCurrent)(&context) == CUDA_SUCCESS);

    CUdeviceptr device = 0;
    REQUIRE(CU(cuMemAlloc_v2)(&device, kMiB) == CUDA_SUCCESS);
    const CUdeviceptr inside = device + 4096;
    CHECK(pointer_attribute<unsigned int>(CU_POINTER_ATTRIBUTE_MEMORY_TYPE, inside) == CU_MEMORYTYPE_DEVICE);
    CHECK(pointer_attribute<CUcontext>(CU_POINTER_ATTRIBUTE_CONTEXT, inside) == context);
    CHECK(pointer_attribute<int>(CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, inside) == 0);
    CHECK(pointer_attribute<CUdeviceptr>(CU_POINTER_ATTRIBUTE_DEVICE_POINTER, inside) == inside);
    CHECK(pointer_attribute<CUdeviceptr>(CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, inside) == device);
    CHECK(pointer_attribute<std::size_t>(CU_POINTER_ATTRIBUTE_RANGE_SIZE, inside) == kMiB);
    CHECK(pointer_attribute<unsigned int>(CU_POINTER_ATTRIBUTE_IS_MANAGED, inside) == 0);
    CHECK(pointer_attribute<CUmemoryPool>(CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE, inside) == nullptr);
    void* host = nullptr;
    CHECK(CU(cuPointerGetAttribute)(&host, CU_POINTER_ATTRIBUTE_HOST_POINTER, inside) ==
          CUDA_ERROR_INVALID_VALUE);
    CHECK(pointer_attribute<unsigned int>(CU_POINTER_ATTRIBUTE_ALLOWED_HANDLE_TYPES, inside) == 0);
    CHECK(CU(cuPointerGetAttribute)(&host, CU_POINTER_ATTRIBUTE_P2P_TOKENS, inside) ==
          CUDA_ERROR_INVALID_VALUE);
    CHECK(CU(cuPointerGetAttribute)(&host, CU_POINTER_ATTRIBUTE_DEVICE_POINTER, device + kMiB) ==
          CUDA_ERROR_INVALID_VALUE);
    CHECK(CU(cuPointerGetAttribute)(nullptr, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, inside) ==
          CUDA_ERROR_INVALID_VALUE);

    // The plural form: device memory has no host address, said with NULL rather than an error.
    int attributes[] = {CU_POINTER_ATTRIBUTE_MEMORY_TYPE, CU_POINTER_ATTRIBUTE_HOST_POINTER,
                        CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, CU_POINTER_ATTRIBUTE_BUFFER_ID};
    unsigned int type = 0;
    host = &type;
    int ordinal = -1;
    unsigned long long first_id = 0;
    void* values[] = {&type, &host, &ordinal, &first_id};
    REQUIRE(CU(cuPointerGetAttributes)(4, attributes, values, device) == CUDA_SUCCESS);
    CHECK(type == CU_MEMORYTYPE_DEVICE);
    CHECK(host == nullptr);
    CHECK(ordinal == 0);
    CHECK(first_id != 0);

    // Every allocation has an id of its own, never handed out again.
    CUdeviceptr second = 0;
    REQUIRE(CU(cuMemAlloc_v2)(&second, kMiB) == CUDA_SUCCESS);
    CHECK(pointer_attribute<unsigned long long>(CU_POINTER_ATTRIBUTE_BUFFER_ID, second) != first_id);
    CHECK(pointer_attribute<CUdeviceptr>(CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, second + kMiB - 1) == second);
    REQUIRE(CU(cuMemFree_v2)(second) == CUDA_SUCCESS);

    // Memory the driver never handed out (or took back): an error alone, NULL values together.
    unsigned long long local = 0;
    host = &type;
    CHECK(CU(cuPointerGetAttribute)(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, address_of(&local)) ==
          CUDA_ERROR_INVALID_VALUE);
    CHECK(CU(cuPointerGetAttribute)(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, second) ==
          CUDA_ERROR_INVALID_VALUE);
    REQUIRE(CU(cuPointerGetAttributes)(4, attributes, values, address_of(&local)) == CUDA_SUCCESS);
    CHECK(type == 0);
    CHECK(host == nullptr);
    CHECK(ordinal == -2);
    CHECK(first_id == 0);

    // The runtime asks the driver, and says it in its own terms.
    cudaPointerAttributes runtime{};
    REQUIRE(RT(cudaPointerGetAttributes)(&runtime, reinterpret_cast<void*>(inside)) == cudaSuccess);
    CHECK(runtime.type == cudaMemoryTypeDevice);
    CHECK(runtime.device == 0);
    CHECK(runtime.devicePointer == reinterpret_cast<void*>(inside));
    CHECK(runtime.hostPointer == nullptr);
    REQUIRE(RT(cudaPointerGetAttributes)(&runtime, &local) == cudaSuccess);
    CHECK(runtime.type == cudaMemoryTypeUnregistered);
    CHECK(runtime.device == -2);
    CHECK(runtime.hostPointer == &local);

    CUdeviceptr managed = 0;
    REQUIRE(CU(cuMemAllocManaged)(&managed, kMiB, 1) == CUDA_SUCCESS);
    REQUIRE(RT(cudaPointerGetAttributes)(&runtime, reinterpret_cast<void*>(managed)) == cudaSuccess);
    CHECK(runtime.type == cudaMemoryTypeManaged);
    CHECK(pointer_attribute<unsigned int>(CU_POINTER_ATTRIBUTE_IS_MANAGED, managed) == 1);
    CHECK(pointer_attribute<void*>(CU_POINTER_ATTRIBUTE_HOST_POINTER, managed) ==
          reinterpret_cast<void*>(managed));

    CUstream stream = nullptr;
    REQUIRE(CU(cuStreamCreate)(&stream, 0) == CUDA_SUCCESS);
    CUdeviceptr ordered = 0;
    REQUIRE(CU(cuMemAllocAsync)(&ordered, kMiB, stream) == CUDA_SUCCESS);
    CUmemoryPool pool = nullptr;
    REQUIRE(CU(cuDeviceGetDefaultMemPool)(&pool, 0) == CUDA_SUCCESS);
    CHECK(pointer_attribute<CUmemoryPool>(CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE, ordered) == pool);

    void* pinned = nullptr;
    REQUIRE(CU(cuMemHostAlloc)(&pinned, kMiB, 0) == CUDA_SUCCESS);
    CHECK(pointer_attribute<unsigned int>(CU_POINTER_ATTRIBUTE_MEMORY_TYPE, address_of(pinned) + 1) ==
          CU_MEMORYTYPE_HOST);
    CHECK(pointer_attribute<void*>(CU_POINTER_ATTRIBUTE_HOST_POINTER, address_of(pinned)) == pinned);
    REQUIRE(RT(cudaPointerGetAttributes)(&runtime, pinned) == cudaSuccess);
    CHECK(runtime.type == cudaMemoryTypeHost);
    CHECK(runtime.hostPointer == pinned);
    std::vector<char> buffer(kMiB);
    REQUIRE(CU(cuMemHostRegister_v2)(buffer.data(), buffer.size(), 0) == CUDA_SUCCESS);
    CHECK(pointer_attribute<std::size_t>(CU_POINTER_ATTRIBUTE_RANGE_SIZE, address_of(&buffer.back())) ==
          kMiB);
    REQUIRE(CU(cuMemHostUnregister)(buffer.data()) == CUDA_SUCCESS);
    CHECK(CU(cuPointerGetAttribute)(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, address_of(buffer.data())) ==
          CUDA_ERROR_INVALID_VALUE);

    CUmemAllocationProp prop{};
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location = {CU_MEM_LOCATION_TYPE_DEVICE, 1};
    CUmemGenericAllocationHandle physical = 0;
    REQUIRE(CU(cuMemCreate)(&physical, kGranularity, &prop, 0) == CUDA_SUCCESS);
    CUdeviceptr reserved = 0;
    REQUIRE(CU(cuMemAddressReserve)(&reserved, 2 * kGranularity, 0, 0, 0) == CUDA_SUCCESS);
    REQUIRE(CU(cuMemMap)(reserved + kGranularity, kGranularity, 0, physical, 0) == CUDA_SUCCESS);
    // The range is the reservation; the mapping is its own attribute, and its id the physical memory's.
    const CUdeviceptr mapped = reserved + kGranularity + 8;
    CHECK(pointer_attribute<int>(CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, mapped) == 1);
    CHECK(pointer_attribute<CUdeviceptr>(CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, mapped) == reserved);
    CHECK(pointer_attribute<std::size_t>(CU_POINTER_ATTRIBUTE_RANGE_SIZE, mapped) == 2 * kGranularity);
    CHECK(pointer_attribute<CUdeviceptr>(CU_POINTER_ATTRIBUTE_MAPPING_BASE_ADDR, mapped) ==
          reserved + kGranularity);
    const auto block = pointer_attribute<unsigned long long>(CU_POINTER_ATTRIBUTE_MEMORY_BLOCK_ID, mapped);
    CUdeviceptr again = 0;
    REQUIRE(CU(cuMemAddressReserve)(&again, kGranularity, 0, 0, 0) == CUDA_SUCCESS);
    REQUIRE(CU(cuMemMap)(again, kGranularity, 0, physical, 0) == CUDA_SUCCESS);
    CHECK(pointer_attribute<unsigned long long>(CU_POINTER_ATTRIBUTE_MEMORY_BLOCK_ID, again) == block);
    REQUIRE(CU(cuMemUnmap)(again, kGranularity) == CUDA_SUCCESS);
    REQUIRE(CU(cuMemAddressFree)(again, kGranularity) == CUDA_SUCCESS);
    // Reserved but not mapped: where it lies, and that nothing backs it; nothing else.
    CHECK(CU(cuPointerGetAttribute)(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, reserved) ==
          CUDA_ERROR_INVALID_VALUE);
    CHECK(pointer_attribute<unsigned int>(CU_POINTER_ATTRIBUTE_MAPPED, reserved) == 0);
    CHECK(pointer_attribute<CUdeviceptr>(CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, reserved + 8) == reserved);
    CHECK(pointer_attribute<unsigned int>(CU_POINTER_ATTRIBUTE_MAPPED, mapped) == 1);

    REQUIRE(CU(cuMemUnmap)(reserved + kGranularity, kGranularity) == CUDA_SUCCESS);
    REQUIRE(CU(cuMemAddressFree)(reserved, 2 * kGranularity) == CUDA_SUCCESS);
    REQUIRE(CU(cuMemRelease)(physical) == CUDA_SUCCESS);
    REQUIRE(CU(cuMemFreeHost)(pinned) == CUDA_SUCCESS);
    REQUIRE(CU(cuMemFreeAsync)(ordered, stream) == CUDA_SUCCESS);
    REQUIRE(CU(cuStreamDestroy_v2)(stream) == CUDA_SUCCESS);
    REQUIRE(CU(cuMemFree_v2)(managed) == CUDA_SUCCESS);
    REQUIRE(CU(cuMemFree_v2)(device) == CUDA_SUCCESS);
}

TEST_CASE("the driver's copies and fills reach every kind of memory, on a stream or not") {
    REQUIRE(CU(cuInit)(0) == CUDA_SUCCESS);
    REQUIRE(RT(cudaFree)(nullptr) == cudaSuccess);
    CUdeviceptr first = 0;
    CUdeviceptr second = 0;
    REQUIRE(CU(cuMemAlloc_v2)(&first, 64) == CUDA_SUCCESS);
    REQUIRE(CU(cuMemAlloc_v2)(&second, 64) == CUDA_SUCCESS);
    CUstream stream = nullptr;
    REQUIRE(CU(cuStreamCreate)(&stream, 0) == CUDA_SUCCESS);

    const char message[16] = "to the device";
    char back[16] = {};
    REQUIRE(CU(cuMemcpyHtoD_v2)(first, message, sizeof message) == CUDA_SUCCESS);
    REQUIRE(CU(cuMemcpyDtoD_v2)(second, first, sizeof message) == CUDA_SUCCESS);
    REQUIRE(CU(cuMemcpyDtoH_v2)(back, second, sizeof back) == CUDA_SUCCESS);
    CHECK(std::string(back) == message);

    REQUIRE(CU(cuMemsetD8Async)(first, 'x', 4, stream) == CUDA_SUCCESS);
    REQUIRE(CU(cuMemcpyDtoDAsync_v2)(second, first, 4, stream) == CUDA_SUCCESS);
    REQUIRE(CU(cuMemcpyDtoHAsync_v2)(back, second, sizeof back, stream) == CUDA_SUCCESS);
    CHECK(std::string(back) == "xxxxhe device");
    REQUIRE(CU(cuMemcpyHtoDAsync_v2)(first, message, sizeof message, stream) == CUDA_SUCCESS);
    REQUIRE(CU(cuMemcpyAsync)(second, first, sizeof message, stream) == CUDA_SUCCESS);
    REQUIRE(CU(cuMemcpy)(address_of(back), second, sizeof back) == CUDA_SUCCESS);
    CHECK(std::string(back) == message);

    std::uint16_t halves[4] = {};
    std::uint32_t words[4] = {};
    REQUIRE(CU(cuMemsetD16_v2)(first, 0xBEEF, 4) == CUDA_SUCCESS);
    REQUIRE(CU(cuMemcpyDtoH_v2)(halves, first, sizeof halves) == CUDA_SUCCESS);
    CHECK(halves[3] == 0xBEEF);
    REQUIRE(CU(cuMemsetD32_v2)(first, 0xDEADBEEF, 4) == CUDA_SUCCESS);
    REQUIRE(CU(cuMemcpyDtoH_v2)(words, first, sizeof words) == CUDA_SUCCESS);
    CHECK(words[3] == 0xDEADBEEF);
    REQUIRE(CU(cuMemsetD16Async)(first, 7, 2, stream) == CUDA_SUCCESS);
    REQUIRE(CU(cuMemsetD8_v2)(first + 4, 0, 4) == CUDA_SUCCESS);
    REQUIRE(CU(cuMemcpyDtoH_v2)(words, first, sizeof words) == CUDA_SUCCESS);
    CHECK(words[0] == 0x00070007);
    CHECK(words[1] == 0);

    CUcontext context = nullptr;
    REQUIRE(CU(cuCtxGetCurrent)(&context) == CUDA_SUCCESS);
    CHECK(CU(cuMemcpyPeer)(second, context, first, context, 8) == CUDA_SUCCESS);
    CHECK(CU(cuMemcpyPeerAsync)(second, nullptr, first, context, 8, stream) == CUDA_ERROR_INVALID_CONTEXT);

    // Misaligned fills, missing addresses and a stream that is gone fail as on a GPU; nothing to copy is
    // no error.
    CHECK(CU(cuMemsetD32_v2)(first + 2, 0, 1) == CUDA_ERROR_INVALID_VALUE);
    CHECK(CU(cuMemsetD16Async)(first + 1, 0, 1, stream) == CUDA_ERROR_INVALID_VALUE);
    CHECK(CU(cuMemcpyHtoD_v2)(0, message, 1) == CUDA_ERROR_INVALID_VALUE);
    CHECK(CU(cuMemcpyDtoH_v2)(nullptr, first, 0) == CUDA_SUCCESS);
    REQUIRE(CU(cuStreamDestroy_v2)(stream) == CUDA_SUCCESS);
    CHECK(CU(cuMemcpyAsync)(second, first, 1, stream) == CUDA_ERROR_INVALID_HANDLE);
    CHECK(CU(cuMemsetD8Async)(first, 0, 1, stream) == CUDA_ERROR_INVALID_HANDLE);
    REQUIRE(CU(cuMemFree_v2)(first) == CUDA_SUCCESS);
    REQUIRE(CU(cuMemFree_v2)(second) == CUDA_SUCCESS);
}

namespace {

// A kernel's host stub: only its address matters, as the key nvcc's generated code registers it under.
void registered_kernel_stub() {}

} // namespace

// XLA loads what it compiles (Triton's kernels among them) by each of these; TensorFlow's autotuner
// takes a kernel that cannot load as one that cannot run.
TEST_CASE("compiled kernels load as modules by every loader XLA uses, and their functions launch") {
    REQUIRE(CU(cuInit)(0) == CUDA_SUCCESS);
    REQUIRE(RT(cudaFree)(nullptr) == cudaSuccess);
    static const char image[] = "a cubin";
    CUmodule modules[3] = {};
    REQUIRE(CU(cuModuleLoadData)(&modules[0], image) == CUDA_SUCCESS);
    REQUIRE(CU(cuModuleLoadDataEx)(&modules[1], image, 0, nullptr, nullptr) == CUDA_SUCCESS);
    REQUIRE(CU(cuModuleLoadFatBinary)(&modules[2], image) == CUDA_SUCCESS);
    CHECK(CU(cuModuleLoadFatBinary)(nullptr, image) == CUDA_ERROR_INVALID_VALUE);
    CHECK(CU(cuModuleLoadFatBinary)(&modules[2], nullptr) == CUDA_ERROR_INVALID_VALUE);
    void* found = nullptr;
    cudaDriverEntryPointQueryResult status = kNotSet;
    CHECK(RT(cudaGetDriverEntryPoint)("cuModuleLoadFatBinary", &found, cudaEnableDefault, &status) ==
          cudaSuccess);
    CHECK(found == driver_symbol("cuModuleLoadFatBinary"));
    for (CUmodule module : modules) {
        CUfunction function = nullptr;
        REQUIRE(CU(cuModuleGetFunction)(&function, module, "fusion") == CUDA_SUCCESS);
        CHECK(CU(cuLaunchKernel)(function, 1, 1, 1, 32, 1, 1, 0, nullptr, nullptr, nullptr) == CUDA_SUCCESS);
        CHECK(CU(cuModuleUnload)(module) == CUDA_SUCCESS);
    }
}

TEST_CASE("a registered kernel is a driver function that launches, as XLA launches its own kernels") {
    REQUIRE(CU(cuInit)(0) == CUDA_SUCCESS);
    REQUIRE(RT(cudaFree)(nullptr) == cudaSuccess);
    static char fat_binary[16] = "fat binary";
    static char device_name[] = "_Z6kernelv";
    void** module = RT(__cudaRegisterFatBinary)(fat_binary);
    const auto* stub = reinterpret_cast<const char*>(&registered_kernel_stub);
    RT(__cudaRegisterFunction)
    (module, stub, device_name, device_name, -1, nullptr, nullptr, nullptr, nullptr, nullptr);
    RT(__cudaRegisterFatBinaryEnd)(module);

    cudaFunction_t function = nullptr;
    REQUIRE(RT(cudaGetFuncBySymbol)(&function, stub) == cudaSuccess);
    REQUIRE(function != nullptr);
    cudaFunction_t again = nullptr;
    REQUIRE(RT(cudaGetFuncBySymbol)(&again, stub) == cudaSuccess);
    CHECK(again == function);
    const int unregistered = 0;
    CHECK(RT(cudaGetFuncBySymbol)(&again, &unregistered) == cudaErrorInvalidDeviceFunction);

    CUstream stream = nullptr;
    REQUIRE(CU(cuStreamCreate)(&stream, 0) == CUDA_SUCCESS);
    CUlaunchConfig config{};
    config.gridDimX = config.gridDimY = config.gridDimZ = 1;
    config.blockDimX = 128;
    config.blockDimY = config.blockDimZ = 1;
    config.hStream = stream;
    CHECK(CU(cuLaunchKernelEx)(&config, function, nullptr, nullptr) == CUDA_SUCCESS);
    int status = -1;
    CHECK(CU(cuStreamIsCapturing)(stream, &status) == CUDA_SUCCESS);
    CHECK(status == 0);
    config.numAttrs = 1;
    CHECK(CU(cuLaunchKernelEx)(&config, function, nullptr, nullptr) == CUDA_ERROR_INVALID_VALUE);
    config.numAttrs = 0;
    CHECK(CU(cuLaunchKernelEx)(nullptr, function, nullptr, nullptr) == CUDA_ERROR_INVALID_VALUE);
    CHECK(CU(cuLaunchKernelEx)(&config, nullptr, nullptr, nullptr) == CUDA_ERROR_INVALID_HANDLE);
    REQUIRE(CU(cuStreamDestroy_v2)(stream) == CUDA_SUCCESS);
    CHECK(CU(cuLaunchKernelEx)(&config, function, nullptr, nullptr) == CUDA_ERROR_INVALID_HANDLE);
    CHECK(CU(cuStreamIsCapturing)(stream, &status) == CUDA_ERROR_INVALID_HANDLE);
    RT(__cudaUnregisterFatBinary)(module);
}
