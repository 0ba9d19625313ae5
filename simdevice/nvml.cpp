// libnvidia-ml.so.1: NVML as far as the programs run on the simulated device ask it.
// - JAX's CUDA plugin (XLA) initialises NVML right after cuInit and counts no device when it cannot; it
//   then asks for the PCIe link, MIG mode and NVLink/fabric state for its topology.
// - PyTorch (c10/cuda/driver_api.cpp), once it finds libnvidia-ml.so.1, asserts that the functions it
//   names exist, and at an out-of-memory error lists the device's processes by the PCI bus id of
//   cudaGetDeviceProperties, asserting success: its message then says "this process has N memory in use",
//   as on a GPU.
// The answers come from the simulated driver (devices, PCI bus ids, the bytes charged to each device);
// what the simulated device has no such thing for (MIG, NVLink, a fabric, confidential computing, field
// values) is NVML_ERROR_NOT_SUPPORTED, as on a PCIe GPU without them.

// The unversioned names as such (PyTorch looks up nvmlDeviceGetComputeRunningProcesses, the first
// version's), not as macros for the newest versions.
#define NVML_NO_UNVERSIONED_FUNC_DEFS
// NVML's own declarations are what the library exports (the simulated device's code is hidden by default).
#pragma GCC visibility push(default)
#include <nvml.h>
#pragma GCC visibility pop

#include <array>
#include <cstdio>
#include <cstring>
#include <dlfcn.h>
#include <unistd.h>

#include "driver_link.h"
#include "sim_config.h"

using gpuleak::sim::driver_functions;
using gpuleak::sim::DriverFunctions;

// The handle NVML hands out: one per device, for the program's whole life.
struct nvmlDevice_st {
    int ordinal;
};

namespace {

std::array<nvmlDevice_st, gpuleak::sim::kMaxDevices> g_devices = [] {
    std::array<nvmlDevice_st, gpuleak::sim::kMaxDevices> devices{};
    for (int i = 0; i < gpuleak::sim::kMaxDevices; ++i)
        devices[static_cast<size_t>(i)].ordinal = i;
    return devices;
}();

// What a PCIe 5.0 x16 board answers.
constexpr unsigned int kPcieGeneration = 5;
constexpr unsigned int kPcieWidth = 16;
// The R580 driver, which CUDA 13.0 ships with, as the simulated driver says CUDA 13.0.
constexpr char kDriverVersion[] = "580.65.06";

int device_count() {
    const DriverFunctions* functions = driver_functions();
    int count = 0;
    if (functions == nullptr || functions->device_get_count(&count) != CUDA_SUCCESS)
        return 0;
    return count;
}

// The bytes the simulated driver charged to `ordinal` for this process; 0 without the driver.
std::size_t charged_bytes(int ordinal) {
    using Charged = std::size_t (*)(int);
    static const Charged charged = []() -> Charged {
        void* loaded =
            driver_functions() != nullptr ? dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD) : nullptr;
        return loaded != nullptr ? reinterpret_cast<Charged>(dlsym(loaded, "gpuleak_sim_device_charged"))
                                 : nullptr;
    }();
    return charged != nullptr ? charged(ordinal) : 0;
}

bool known(nvmlDevice_t device) {
    return device != nullptr && device >= g_devices.data() && device < g_devices.data() + device_count();
}

} // namespace

extern "C" {

nvmlReturn_t nvmlInit_v2() {
    return driver_functions() != nullptr ? NVML_SUCCESS : NVML_ERROR_DRIVER_NOT_LOADED;
}

nvmlReturn_t nvmlShutdown() {
    return NVML_SUCCESS;
}

const char* nvmlErrorString(nvmlReturn_t result) {
    switch (result) {
    case NVML_SUCCESS:
        return "Success";
    case NVML_ERROR_INVALID_ARGUMENT:
        return "Invalid Argument";
    case NVML_ERROR_NOT_SUPPORTED:
        return "Not Supported on the gpuleak simulated CUDA device";
    case NVML_ERROR_INSUFFICIENT_SIZE:
        return "Insufficient Size";
    case NVML_ERROR_DRIVER_NOT_LOADED:
        return "Driver Not Loaded (the simulated libcuda.so.1 could not be loaded)";
    case NVML_ERROR_NOT_FOUND:
        return "Not Found";
    default:
        return "Unknown Error";
    }
}

nvmlReturn_t nvmlSystemGetDriverVersion(char* version, unsigned int length) {
    if (version == nullptr)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (length < sizeof kDriverVersion)
        return NVML_ERROR_INSUFFICIENT_SIZE;
    std::memcpy(version, kDriverVersion, sizeof kDriverVersion);
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlSystemGetCudaDriverVersion_v2(int* cudaDriverVersion) {
    const DriverFunctions* functions = driver_functions();
    if (cudaDriverVersion == nullptr)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (functions == nullptr)
        return NVML_ERROR_DRIVER_NOT_LOADED;
    return functions->driver_get_version(cudaDriverVersion) == CUDA_SUCCESS ? NVML_SUCCESS
                                                                            : NVML_ERROR_UNKNOWN;
}

nvmlReturn_t nvmlSystemGetConfComputeState(nvmlConfComputeSystemState_t* /*state*/) {
    return NVML_ERROR_NOT_SUPPORTED;
}

nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int* deviceCount) {
    if (deviceCount == nullptr)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (driver_functions() == nullptr)
        return NVML_ERROR_DRIVER_NOT_LOADED;
    *deviceCount = static_cast<unsigned int>(device_count());
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t* device) {
    if (device == nullptr || index >= static_cast<unsigned int>(device_count()))
        return NVML_ERROR_INVALID_ARGUMENT;
    *device = &g_devices[index];
    return NVML_SUCCESS;
}

// The bus id as the driver spells it ("0000:01:00.0"); NVML also takes "00000000:01:00.0".
nvmlReturn_t nvmlDeviceGetHandleByPciBusId_v2(const char* pciBusId, nvmlDevice_t* device) {
    const DriverFunctions* functions = driver_functions();
    if (pciBusId == nullptr || device == nullptr)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (functions == nullptr)
        return NVML_ERROR_DRIVER_NOT_LOADED;
    unsigned int domain = 0;
    unsigned int bus = 0;
    unsigned int slot = 0;
    unsigned int function = 0;
    if (std::sscanf(pciBusId, "%x:%x:%x.%x", &domain, &bus, &slot, &function) != 4)
        return NVML_ERROR_INVALID_ARGUMENT;
    for (int ordinal = 0; ordinal < device_count(); ++ordinal) {
        char own[32];
        unsigned int own_domain = 0;
        unsigned int own_bus = 0;
        unsigned int own_slot = 0;
        unsigned int own_function = 0;
        if (functions->device_get_pci_bus_id(own, sizeof own, ordinal) == CUDA_SUCCESS &&
            std::sscanf(own, "%x:%x:%x.%x", &own_domain, &own_bus, &own_slot, &own_function) == 4 &&
            own_domain == domain && own_bus == bus && own_slot == slot && own_function == function) {
            *device = &g_devices[static_cast<size_t>(ordinal)];
            return NVML_SUCCESS;
        }
    }
    return NVML_ERROR_NOT_FOUND;
}

nvmlReturn_t nvmlDeviceGetCurrPcieLinkGeneration(nvmlDevice_t device, unsigned int* currLinkGen) {
    if (!known(device) || currLinkGen == nullptr)
        return NVML_ERROR_INVALID_ARGUMENT;
    *currLinkGen = kPcieGeneration;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetCurrPcieLinkWidth(nvmlDevice_t device, unsigned int* currLinkWidth) {
    if (!known(device) || currLinkWidth == nullptr)
        return NVML_ERROR_INVALID_ARGUMENT;
    *currLinkWidth = kPcieWidth;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetMigMode(nvmlDevice_t device, unsigned int* /*currentMode*/,
                                  unsigned int* /*pendingMode*/) {
    return known(device) ? NVML_ERROR_NOT_SUPPORTED : NVML_ERROR_INVALID_ARGUMENT;
}

nvmlReturn_t nvmlDeviceGetP2PStatus(nvmlDevice_t device1, nvmlDevice_t device2,
                                    nvmlGpuP2PCapsIndex_t /*p2pIndex*/, nvmlGpuP2PStatus_t* /*p2pStatus*/) {
    return known(device1) && known(device2) ? NVML_ERROR_NOT_SUPPORTED : NVML_ERROR_INVALID_ARGUMENT;
}

nvmlReturn_t nvmlDeviceGetNvLinkState(nvmlDevice_t device, unsigned int /*link*/,
                                      nvmlEnableState_t* /*isActive*/) {
    return known(device) ? NVML_ERROR_NOT_SUPPORTED : NVML_ERROR_INVALID_ARGUMENT;
}

nvmlReturn_t nvmlDeviceGetNvLinkCapability(nvmlDevice_t device, unsigned int /*link*/,
                                           nvmlNvLinkCapability_t /*capability*/,
                                           unsigned int* /*capResult*/) {
    return known(device) ? NVML_ERROR_NOT_SUPPORTED : NVML_ERROR_INVALID_ARGUMENT;
}

// A GPU outside a multi-node NVLink fabric answers, as a driver of this version does for one, that it
// takes part in no fabric; XLA logs an error at start-up for each device that answers NOT_SUPPORTED.
nvmlReturn_t nvmlDeviceGetGpuFabricInfoV(nvmlDevice_t device, nvmlGpuFabricInfoV_t* gpuFabricInfo) {
    if (!known(device) || gpuFabricInfo == nullptr)
        return NVML_ERROR_INVALID_ARGUMENT;
    // Version 2 or a later one, which begins with version 2's fields: only those are written.
    const unsigned int version = gpuFabricInfo->version;
    if (version >> 24 < nvmlGpuFabricInfo_v2 >> 24)
        return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
    *gpuFabricInfo = nvmlGpuFabricInfoV_t{};
    gpuFabricInfo->version = version;
    gpuFabricInfo->state = NVML_GPU_FABRIC_STATE_NOT_SUPPORTED;
    return NVML_SUCCESS;
}

// The simulated device is this process's own: it is listed, with what it holds there, once it holds
// anything.
nvmlReturn_t nvmlDeviceGetComputeRunningProcesses(nvmlDevice_t device, unsigned int* infoCount,
                                                  nvmlProcessInfo_v1_t* infos) {
    if (!known(device) || infoCount == nullptr)
        return NVML_ERROR_INVALID_ARGUMENT;
    const std::size_t used = charged_bytes(device->ordinal);
    const unsigned int count = used > 0 ? 1 : 0;
    const unsigned int room = *infoCount;
    *infoCount = count;
    if (room < count)
        return NVML_ERROR_INSUFFICIENT_SIZE;
    if (count > 0) {
        if (infos == nullptr)
            return NVML_ERROR_INVALID_ARGUMENT;
        infos[0] = nvmlProcessInfo_v1_t{static_cast<unsigned int>(::getpid()), used};
    }
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetNvLinkRemoteDeviceType(nvmlDevice_t device, unsigned int /*link*/,
                                                 nvmlIntNvLinkDeviceType_t* /*pNvLinkDeviceType*/) {
    return known(device) ? NVML_ERROR_NOT_SUPPORTED : NVML_ERROR_INVALID_ARGUMENT;
}

nvmlReturn_t nvmlDeviceGetNvLinkRemotePciInfo_v2(nvmlDevice_t device, unsigned int /*link*/,
                                                 nvmlPciInfo_t* /*pci*/) {
    return known(device) ? NVML_ERROR_NOT_SUPPORTED : NVML_ERROR_INVALID_ARGUMENT;
}

nvmlReturn_t nvmlDeviceGetFieldValues(nvmlDevice_t device, int /*valuesCount*/,
                                      nvmlFieldValue_t* /*values*/) {
    return known(device) ? NVML_ERROR_NOT_SUPPORTED : NVML_ERROR_INVALID_ARGUMENT;
}

} // extern "C"
