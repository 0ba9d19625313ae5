// What programs ask the simulated device's stand-ins before they start: the libraries that cannot run on
// it answer their versions as the toolkit's headers give them (JAX's CUDA plugin refuses to start when
// cuSPARSE or cuSOLVER cannot say theirs), or for TensorFlow's older sonames as CUDA 12.8's releases;
// cuDNN makes a handle; and NVML counts and names the simulated driver's devices (XLA counts no device
// when NVML cannot start).
#include <catch2/catch.hpp>

#include <cstring>
#include <cuda.h>
#include <cudnn.h>
#include <cufft.h>
#include <cusolver_common.h>
#include <cusparse.h>
#include <dlfcn.h>
// The unversioned names as the stand-in exports them (PyTorch looks up the first version's).
#define NVML_NO_UNVERSIONED_FUNC_DEFS
#include <nvml.h>
#include <string>
#include <unistd.h>

namespace {

template <typename Function> Function function_of(const char* library, const char* name) {
    // The driver first, by path: the stand-ins' dlopen("libcuda.so.1") then finds it loaded.
    static void* const driver = dlopen(GPULEAK_SIM_CUDA, RTLD_NOW | RTLD_GLOBAL);
    REQUIRE(driver != nullptr);
    void* handle = dlopen(library, RTLD_NOW | RTLD_LOCAL);
    INFO(library << ": " << (handle == nullptr ? dlerror() : ""));
    REQUIRE(handle != nullptr);
    auto* function = reinterpret_cast<Function>(dlsym(handle, name));
    REQUIRE(function != nullptr);
    return function;
}

} // namespace

TEST_CASE("cuSPARSE's stand-in answers its version properties") {
    const auto get_property =
        function_of<decltype(&cusparseGetProperty)>(GPULEAK_SIM_CUSPARSE, "cusparseGetProperty");
    int major = 0;
    int minor = 0;
    int patch = 0;
    CHECK(get_property(MAJOR_VERSION, &major) == CUSPARSE_STATUS_SUCCESS);
    CHECK(get_property(MINOR_VERSION, &minor) == CUSPARSE_STATUS_SUCCESS);
    CHECK(get_property(PATCH_LEVEL, &patch) == CUSPARSE_STATUS_SUCCESS);
    CHECK((major == CUSPARSE_VER_MAJOR && minor == CUSPARSE_VER_MINOR && patch == CUSPARSE_VER_PATCH));
    CHECK(get_property(static_cast<libraryPropertyType>(7), &major) == CUSPARSE_STATUS_INVALID_VALUE);
    CHECK(get_property(MAJOR_VERSION, nullptr) == CUSPARSE_STATUS_INVALID_VALUE);
}

TEST_CASE("cuSOLVER's stand-in answers its version") {
    const auto get_version =
        function_of<decltype(&cusolverGetVersion)>(GPULEAK_SIM_CUSOLVER, "cusolverGetVersion");
    int version = 0;
    CHECK(get_version(&version) == CUSOLVER_STATUS_SUCCESS);
    CHECK(version == CUSOLVER_VERSION);
    CHECK(get_version(nullptr) == CUSOLVER_STATUS_INVALID_VALUE);
}

// TensorFlow's CUDA 12 build loads these sonames; built against the toolkit's newer headers, they answer
// CUDA 12.8's releases, at their own version nodes.
TEST_CASE("cuFFT's and cuSOLVER's stand-ins for TensorFlow's sonames answer CUDA 12.8's releases") {
    int version = 0;
    CHECK(function_of<decltype(&cufftGetVersion)>(GPULEAK_SIM_CUFFT11, "cufftGetVersion")(&version) ==
          CUFFT_SUCCESS);
    CHECK(version == 11303);
    int major = 0;
    CHECK(function_of<decltype(&cufftGetProperty)>(GPULEAK_SIM_CUFFT11, "cufftGetProperty")(
              MAJOR_VERSION, &major) == CUFFT_SUCCESS);
    CHECK(major == 11);
    CHECK(function_of<decltype(&cusolverGetVersion)>(GPULEAK_SIM_CUSOLVER11, "cusolverGetVersion")(
              &version) == CUSOLVER_STATUS_SUCCESS);
    CHECK(version == 11702);
    void* cufft11 = dlopen(GPULEAK_SIM_CUFFT11, RTLD_NOW | RTLD_LOCAL);
    REQUIRE(cufft11 != nullptr);
    CHECK(dlvsym(cufft11, "cufftCreate", "libcufft.so.11") != nullptr);
    CHECK(dlvsym(cufft11, "cufftCreate", "libcufft.so.12") == nullptr);
}

// TensorFlow and XLA make a cuDNN handle at their first compiled step, whatever the model: a model of
// dense layers trains; a convolution fails at its first cuDNN call, saying why.
TEST_CASE("cuDNN's stand-in makes a handle that keeps its stream, and refuses what would run on it") {
    cudnnHandle_t handle = nullptr;
    REQUIRE(function_of<decltype(&cudnnCreate)>(GPULEAK_SIM_CUDNN, "cudnnCreate")(&handle) ==
            CUDNN_STATUS_SUCCESS);
    REQUIRE(handle != nullptr);
    auto* const stream = reinterpret_cast<cudaStream_t>(0x1234);
    CHECK(function_of<decltype(&cudnnSetStream)>(GPULEAK_SIM_CUDNN, "cudnnSetStream")(handle, stream) ==
          CUDNN_STATUS_SUCCESS);
    cudaStream_t kept = nullptr;
    CHECK(function_of<decltype(&cudnnGetStream)>(GPULEAK_SIM_CUDNN, "cudnnGetStream")(handle, &kept) ==
          CUDNN_STATUS_SUCCESS);
    CHECK(kept == stream);
    cudnnTensorDescriptor_t tensor = nullptr;
    CHECK(function_of<decltype(&cudnnCreateTensorDescriptor)>(
              GPULEAK_SIM_CUDNN, "cudnnCreateTensorDescriptor")(&tensor) == CUDNN_STATUS_NOT_SUPPORTED);
    const std::string why = function_of<decltype(&cudnnGetErrorString)>(
        GPULEAK_SIM_CUDNN, "cudnnGetErrorString")(CUDNN_STATUS_NOT_SUPPORTED);
    CHECK(why.find("simulated CUDA device") != std::string::npos);
    CHECK(function_of<decltype(&cudnnDestroy)>(GPULEAK_SIM_CUDNN, "cudnnDestroy")(handle) ==
          CUDNN_STATUS_SUCCESS);
    CHECK(function_of<decltype(&cudnnCreate)>(GPULEAK_SIM_CUDNN, "cudnnCreate")(nullptr) ==
          CUDNN_STATUS_BAD_PARAM);
}

#define NVML(name) function_of<decltype(&::name)>(GPULEAK_SIM_NVML, #name)
#define DRIVER(name) function_of<decltype(&::name)>(GPULEAK_SIM_CUDA, #name)

TEST_CASE("NVML starts, and counts and finds the simulated driver's devices") {
    REQUIRE(NVML(nvmlInit_v2)() == NVML_SUCCESS);
    unsigned int count = 0;
    CHECK(NVML(nvmlDeviceGetCount_v2)(&count) == NVML_SUCCESS);
    int driver_count = 0;
    REQUIRE(DRIVER(cuInit)(0) == CUDA_SUCCESS);
    REQUIRE(DRIVER(cuDeviceGetCount)(&driver_count) == CUDA_SUCCESS);
    CHECK(count == static_cast<unsigned int>(driver_count));

    nvmlDevice_t first = nullptr;
    REQUIRE(NVML(nvmlDeviceGetHandleByIndex_v2)(0, &first) == NVML_SUCCESS);
    nvmlDevice_t none = nullptr;
    CHECK(NVML(nvmlDeviceGetHandleByIndex_v2)(count, &none) == NVML_ERROR_INVALID_ARGUMENT);
    // By the bus id the driver gives, in either spelling NVML takes.
    char bus_id[32];
    REQUIRE(DRIVER(cuDeviceGetPCIBusId)(bus_id, sizeof bus_id, 0) == CUDA_SUCCESS);
    nvmlDevice_t by_bus = nullptr;
    CHECK(NVML(nvmlDeviceGetHandleByPciBusId_v2)(bus_id, &by_bus) == NVML_SUCCESS);
    CHECK(by_bus == first);
    const std::string long_form = std::string("0000") + bus_id;
    CHECK(NVML(nvmlDeviceGetHandleByPciBusId_v2)(long_form.c_str(), &by_bus) == NVML_SUCCESS);
    CHECK(by_bus == first);
    CHECK(NVML(nvmlDeviceGetHandleByPciBusId_v2)("0000:7f:00.0", &by_bus) == NVML_ERROR_NOT_FOUND);

    unsigned int generation = 0;
    unsigned int width = 0;
    CHECK(NVML(nvmlDeviceGetCurrPcieLinkGeneration)(first, &generation) == NVML_SUCCESS);
    CHECK(NVML(nvmlDeviceGetCurrPcieLinkWidth)(first, &width) == NVML_SUCCESS);
    CHECK((generation > 0 && width > 0));
    int cuda_version = 0;
    CHECK(NVML(nvmlSystemGetCudaDriverVersion_v2)(&cuda_version) == NVML_SUCCESS);
    int driver_version = 0;
    REQUIRE(DRIVER(cuDriverGetVersion)(&driver_version) == CUDA_SUCCESS);
    CHECK(cuda_version == driver_version);
    char version[NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE];
    CHECK(NVML(nvmlSystemGetDriverVersion)(version, sizeof version) == NVML_SUCCESS);
    CHECK(std::strlen(version) > 0);
    CHECK(NVML(nvmlSystemGetDriverVersion)(version, 2) == NVML_ERROR_INSUFFICIENT_SIZE);

    // What the simulated device has no such thing for, as a PCIe GPU without MIG or NVLink answers.
    unsigned int current = 0;
    unsigned int pending = 0;
    CHECK(NVML(nvmlDeviceGetMigMode)(first, &current, &pending) == NVML_ERROR_NOT_SUPPORTED);
    nvmlEnableState_t active{};
    CHECK(NVML(nvmlDeviceGetNvLinkState)(first, 0, &active) == NVML_ERROR_NOT_SUPPORTED);
    CHECK(NVML(nvmlDeviceGetNvLinkState)(nullptr, 0, &active) == NVML_ERROR_INVALID_ARGUMENT);
    nvmlGpuFabricInfoV_t fabric{};
    fabric.version = nvmlGpuFabricInfo_v2;
    fabric.state = NVML_GPU_FABRIC_STATE_COMPLETED;
    CHECK(NVML(nvmlDeviceGetGpuFabricInfoV)(first, &fabric) == NVML_SUCCESS);
    CHECK(fabric.state == NVML_GPU_FABRIC_STATE_NOT_SUPPORTED);
    fabric.version = 0;
    CHECK(NVML(nvmlDeviceGetGpuFabricInfoV)(first, &fabric) == NVML_ERROR_ARGUMENT_VERSION_MISMATCH);
    CHECK(std::string(NVML(nvmlErrorString)(NVML_ERROR_NOT_SUPPORTED)).find("simulated") !=
          std::string::npos);
    CHECK(NVML(nvmlShutdown)() == NVML_SUCCESS);
}

TEST_CASE("NVML lists this process on a device once it holds memory there, with what it holds") {
    REQUIRE(NVML(nvmlInit_v2)() == NVML_SUCCESS);
    REQUIRE(DRIVER(cuInit)(0) == CUDA_SUCCESS);
    nvmlDevice_t device = nullptr;
    REQUIRE(NVML(nvmlDeviceGetHandleByIndex_v2)(0, &device) == NVML_SUCCESS);
    const auto processes = NVML(nvmlDeviceGetComputeRunningProcesses);

    CUcontext context = nullptr;
    REQUIRE(DRIVER(cuDevicePrimaryCtxRetain)(&context, 0) == CUDA_SUCCESS);
    REQUIRE(DRIVER(cuCtxSetCurrent)(context) == CUDA_SUCCESS);
    CUdeviceptr buffer = 0;
    REQUIRE(DRIVER(cuMemAlloc_v2)(&buffer, 3 << 20) == CUDA_SUCCESS);
    // Too little room: the count needed, as PyTorch's loop expects.
    unsigned int count = 0;
    CHECK(processes(device, &count, nullptr) == NVML_ERROR_INSUFFICIENT_SIZE);
    CHECK(count == 1);
    nvmlProcessInfo_v1_t infos[4]{};
    count = 4;
    REQUIRE(processes(device, &count, infos) == NVML_SUCCESS);
    REQUIRE(count == 1);
    CHECK(infos[0].pid == static_cast<unsigned int>(::getpid()));
    CHECK(infos[0].usedGpuMemory >= (3u << 20));
    REQUIRE(DRIVER(cuMemFree_v2)(buffer) == CUDA_SUCCESS);
    CHECK(processes(nullptr, &count, infos) == NVML_ERROR_INVALID_ARGUMENT);
    nvmlIntNvLinkDeviceType_t type{};
    CHECK(NVML(nvmlDeviceGetNvLinkRemoteDeviceType)(device, 0, &type) == NVML_ERROR_NOT_SUPPORTED);
}
