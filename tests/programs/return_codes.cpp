// return_codes <log>: CUDA calls that fail or have odd outcomes, each logged with its return code, what
// became of its out-parameters and errno, so that a test can check they are the same with and without
// gpuleak and that the trace records what happened. Meant for a device of 64 MiB
// (GPULEAK_SIM_CAPACITY=64MiB), where 1 GiB does not fit. Log lines as in api_families, plus
// out=unchanged|changed|null, pitch=, errno=. One allocation is left live at exit.
#include <cerrno>
#include <cstdint>
#include <cstdio>

#include "allocation_log.h"
#include "cuda_declarations.h"

namespace {

constexpr size_t kTooBig = size_t{1} << 30;
constexpr size_t kLeaked = 777 * 1024;
// Values no call writes: what an out-parameter holds when the call left it alone.
constexpr uintptr_t kUntouched = 0x5ca1ab1e;
constexpr size_t kUntouchedPitch = 77;
// errno before each call: a call that changes it changes it the same way with and without gpuleak.
constexpr int kErrnoBefore = EDOM;

template <class T> unsigned long long as_u64(T* pointer) {
    return reinterpret_cast<uintptr_t>(pointer);
}
unsigned long long as_u64(unsigned long long value) {
    return value;
}

class Calls {
  public:
    explicit Calls(const AllocationLog& log) : log_(log) {}

    int run() {
        capture_mode();
        oversized();
        odd_sizes_and_pitches();
        failed_frees();
        lookups();
        void* leaked = nullptr;
        const int rc = call([&] { return cudaMalloc(&leaked, kLeaked); });
        alloc("cudaMalloc", rc, leaked, kLeaked, kLeaked);
        std::printf("return_codes: %d calls, %d failed\n", calls_, failed_);
        return 0;
    }

  private:
    // The thread's stream capture mode as the program set it, read back after an allocation and a free:
    // gpuleak's questions to the driver then run in a mode of their own and put the program's back. The
    // first allocation of the process, whose size gpuleak always asks the driver about.
    void capture_mode() {
        constexpr int kThreadLocal = 1;
        constexpr size_t kBytes = size_t{2} << 20;
        int mode = kThreadLocal;
        log_.line("call cudaThreadExchangeStreamCaptureMode rc=%d",
                  cudaThreadExchangeStreamCaptureMode(&mode));
        void* buffer = reinterpret_cast<void*>(kUntouched);
        const int rc = call([&] { return cudaMalloc(&buffer, kBytes); });
        alloc("cudaMalloc", rc, buffer, kBytes, kBytes);
        free("cudaFree", call([&] { return cudaFree(buffer); }), as_u64(buffer));
        mode = 0; // global, the default
        log_.line("call cudaThreadExchangeStreamCaptureMode rc=%d",
                  cudaThreadExchangeStreamCaptureMode(&mode));
        std::printf("return_codes: capture mode %d after an allocation and a free, set %d\n", mode,
                    kThreadLocal);
    }

    template <class Call> int call(Call&& function) {
        errno = kErrnoBefore;
        const int rc = function();
        errno_after_ = errno;
        ++calls_;
        failed_ += rc != 0;
        return rc;
    }

    // Takes the call's code, not the call: an argument list would copy `out` before or after the call.
    template <class Out>
    void alloc(const char* symbol, int rc, Out out, size_t size, size_t requested, const char* extra = "") {
        const unsigned long long address = as_u64(out);
        const char* state = address == kUntouched ? "unchanged" : address == 0 ? "null" : "changed";
        log_.line("alloc %s rc=%d address=0x%llx size=%zu requested=%zu stream=0x0 out=%s errno=%d%s", symbol,
                  rc, address, rc == 0 ? size : 0, requested, state, errno_after_, extra);
    }

    void free(const char* symbol, int rc, unsigned long long address, size_t size = 0,
              const void* stream = nullptr) {
        log_.line("free %s rc=%d address=0x%llx size=%zu stream=0x%llx errno=%d", symbol, rc, address, size,
                  as_u64(stream), errno_after_);
    }

    // Allocations the 64 MiB device cannot hold: they fail with 2 and leave the out-parameters alone.
    void oversized() {
        void* pointer = reinterpret_cast<void*>(kUntouched);
        int rc = call([&] { return cudaMalloc(&pointer, kTooBig); });
        alloc("cudaMalloc", rc, pointer, kTooBig, kTooBig);
        // The runtime's sticky error is the allocation's own, not one gpuleak caused around it.
        log_.line("call cudaGetLastError rc=%d", cudaGetLastError());
        log_.line("call cudaGetLastError rc=%d", cudaGetLastError());

        CUdeviceptr device_pointer = kUntouched;
        rc = call([&] { return cuMemAlloc_v2(&device_pointer, kTooBig); });
        alloc("cuMemAlloc_v2", rc, device_pointer, kTooBig, kTooBig);

        CUmemGenericAllocationHandle handle = kUntouched;
        CUmemAllocationProp prop{};
        prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
        prop.location = {CU_MEM_LOCATION_TYPE_DEVICE, 0};
        rc = call([&] { return cuMemCreate(&handle, kTooBig, &prop, 0); });
        alloc("cuMemCreate", rc, handle, kTooBig, kTooBig);

        const size_t width = 64 << 10;
        const size_t height = 32 << 10;
        size_t pitch = kUntouchedPitch;
        pointer = reinterpret_cast<void*>(kUntouched);
        rc = call([&] { return cudaMallocPitch(&pointer, &pitch, width, height); });
        alloc("cudaMallocPitch", rc, pointer, 0, width * height, pitch_text(pitch));

        pitch = kUntouchedPitch;
        device_pointer = kUntouched;
        rc = call([&] { return cuMemAllocPitch_v2(&device_pointer, &pitch, width, height, 4); });
        alloc("cuMemAllocPitch_v2", rc, device_pointer, 0, width * height, pitch_text(pitch));

        pointer = reinterpret_cast<void*>(kUntouched);
        rc = call([&] { return cudaMallocManaged(&pointer, kTooBig, 1); });
        alloc("cudaMallocManaged", rc, pointer, kTooBig, kTooBig);

        device_pointer = kUntouched;
        rc = call([&] { return cuMemAllocAsync(&device_pointer, kTooBig, nullptr); });
        alloc("cuMemAllocAsync", rc, device_pointer, kTooBig, kTooBig);
    }

    void odd_sizes_and_pitches() {
        CUdeviceptr device_pointer = kUntouched;
        int rc = call([&] { return cuMemAlloc_v2(&device_pointer, 0); });
        alloc("cuMemAlloc_v2", rc, device_pointer, 0, 0);

        // Zero bytes through the runtime succeed with NULL: no object.
        void* pointer = reinterpret_cast<void*>(kUntouched);
        rc = call([&] { return cudaMalloc(&pointer, 0); });
        alloc("cudaMalloc", rc, pointer, 0, 0);

        size_t pitch = kUntouchedPitch;
        pointer = reinterpret_cast<void*>(kUntouched);
        rc = call([&] { return cudaMallocPitch(&pointer, &pitch, 100, 7); });
        alloc("cudaMallocPitch", rc, pointer, pitch * 7, 100 * 7, pitch_text(pitch));
        if (rc == 0)
            free("cudaFree", call([&] { return cudaFree(pointer); }), as_u64(pointer));

        pitch = kUntouchedPitch;
        device_pointer = kUntouched;
        rc = call([&] { return cuMemAllocPitch_v2(&device_pointer, &pitch, 1000, 5, 3); });
        alloc("cuMemAllocPitch_v2", rc, device_pointer, 0, 1000 * 5, pitch_text(pitch));

        pitch = kUntouchedPitch;
        device_pointer = kUntouched;
        rc = call([&] { return cuMemAllocPitch_v2(&device_pointer, &pitch, 1000, 5, 4); });
        alloc("cuMemAllocPitch_v2", rc, device_pointer, pitch * 5, 1000 * 5, pitch_text(pitch));
        if (rc == 0)
            free("cuMemFree_v2", call([&] { return cuMemFree_v2(device_pointer); }), device_pointer);

        cudaPitchedPtr pitched{reinterpret_cast<void*>(kUntouched), kUntouchedPitch, 0, 0};
        const cudaExtent extent{300, 4, 2};
        rc = call([&] { return cudaMalloc3D(&pitched, extent); });
        char fields[96];
        std::snprintf(fields, sizeof fields, " pitch=%zu xsize=%zu ysize=%zu", pitched.pitch, pitched.xsize,
                      pitched.ysize);
        alloc("cudaMalloc3D", rc, pitched.ptr, pitched.pitch * extent.height * extent.depth,
              extent.width * extent.height * extent.depth, fields);
        if (rc == 0)
            free("cudaFree", call([&] { return cudaFree(pitched.ptr); }), as_u64(pitched.ptr));

        device_pointer = kUntouched;
        rc = call([&] { return cuMemAddressReserve(&device_pointer, 1000, 0, 0, 0); });
        alloc("cuMemAddressReserve", rc, device_pointer, 0, 1000);
    }

    void failed_frees() {
        const unsigned long long bogus = 0x1000;
        free("cudaFree", call([&] { return cudaFree(reinterpret_cast<void*>(bogus)); }), bogus);
        free("cuMemFree_v2", call([&] { return cuMemFree_v2(bogus); }), bogus);
        // cudaFree(NULL) is the runtime's "initialise now": it succeeds and frees nothing.
        free("cudaFree", call([&] { return cudaFree(nullptr); }), 0);
        static char never_registered[4096];
        free("cuMemHostUnregister", call([&] { return cuMemHostUnregister(never_registered); }),
             as_u64(never_registered));
        const size_t granule = size_t{2} << 20;
        free("cuMemUnmap", call([&] { return cuMemUnmap(granule, granule); }), granule, granule);

        // A free that fails leaves the object allocated; the free that follows releases it.
        CUdeviceptr device_pointer = 0;
        const int rc = call([&] { return cuMemAlloc_v2(&device_pointer, 4096); });
        alloc("cuMemAlloc_v2", rc, device_pointer, 4096, 4096);
        const auto no_such_stream = reinterpret_cast<CUstream>(0xdead0);
        free("cuMemFreeAsync", call([&] { return cuMemFreeAsync(device_pointer, no_such_stream); }),
             device_pointer, 0, no_such_stream);
        free("cuMemFree_v2", call([&] { return cuMemFree_v2(device_pointer); }), device_pointer);
    }

    void lookups() {
        void* function = nullptr;
        int status = -1;
        int rc = call([&] { return cuGetProcAddress_v2("cuNoSuchFunction", &function, 13000, 0, &status); });
        log_.line("call cuGetProcAddress_v2 base=cuNoSuchFunction rc=%d status=%d found=%d errno=%d", rc,
                  status, function != nullptr, errno_after_);
        function = reinterpret_cast<void*>(kUntouched);
        status = -1;
        rc = call([&] { return cuGetProcAddress_v2("cuMemAlloc", &function, 3000, 0, &status); });
        log_.line("call cuGetProcAddress_v2 base=cuMemAlloc version=3000 rc=%d status=%d found=%d errno=%d",
                  rc, status, function != nullptr, errno_after_);
        function = reinterpret_cast<void*>(kUntouched);
        status = -1;
        rc = call([&] { return cudaGetDriverEntryPoint("cuNoSuchFunction", &function, 0, &status); });
        log_.line("call cudaGetDriverEntryPoint base=cuNoSuchFunction rc=%d status=%d found=%d errno=%d", rc,
                  status, function != nullptr, errno_after_);
    }

    const char* pitch_text(size_t pitch) {
        std::snprintf(pitch_text_, sizeof pitch_text_, " pitch=%zu", pitch);
        return pitch_text_;
    }

    const AllocationLog& log_;
    int errno_after_ = 0;
    int calls_ = 0;
    int failed_ = 0;
    char pitch_text_[32] = {};
};

} // namespace

int main(int argc, char** argv) {
    if (argc < 2) {
        std::fprintf(stderr, "usage: return_codes <log>\n");
        return 2;
    }
    AllocationLog log(argv[1]);
    return Calls(log).run();
}
