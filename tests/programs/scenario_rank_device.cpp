// Scenario with a known answer in a job: a rank that touches the GPU before it picks its own device, as
// a script that calls torch.cuda.set_device(local_rank) too late does. It allocates 1 MiB on device 0
// (with the argument "context": only makes its context there, by cudaFree(NULL)), then selects the device
// of its local rank (SLURM_LOCALID, else LOCAL_RANK) and keeps 16 MiB there. Run with GPULEAK_SIM_DEVICES
// at least the ranks on the machine.
#include <cstdlib>
#include <initializer_list>
#include <string_view>

extern "C" int cudaMalloc(void** pointer, size_t size);
extern "C" int cudaFree(void* pointer);
extern "C" int cudaSetDevice(int device);

namespace {

int local_rank() {
    for (const char* name : {"SLURM_LOCALID", "LOCAL_RANK"})
        if (const char* value = std::getenv(name))
            return std::atoi(value);
    return 0;
}

} // namespace

int main(int argc, char** argv) {
    constexpr size_t kMiB = size_t{1} << 20;
    void* early = nullptr;
    if (argc > 1 && std::string_view(argv[1]) == "context")
        cudaFree(nullptr);
    else
        cudaMalloc(&early, kMiB);
    cudaSetDevice(local_rank());
    void* weights = nullptr;
    cudaMalloc(&weights, 16 * kMiB);
    return 0;
}
