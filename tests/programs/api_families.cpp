// api_families <log> <path>: one allocation and its free for every allocation family of
// cuda_entry_points.def, each function obtained through <path>:
//   symbol                                  calls the exported function
//   cuGetProcAddress, cuGetProcAddress_v2   asks the driver for the row's base name at the row's version
//   cudaGetDriverEntryPoint[ByVersion][_ptsz]  asks the runtime the same
//   dlsym_handle                            dlopen("libcudart.so.13" / "libcuda.so.1") + dlsym(handle,
//   symbol)
// Runtime rows are reachable by symbol and dlsym only: the lookups hand out driver functions alone.
// Each call goes to the log (allocation_log.h) as "<op> <symbol> key=value...";
// stdout gets a summary that must not change under gpuleak. Runs on the second simulated device
// (GPULEAK_SIM_DEVICES=3), so that a recorder charging everything to device 0 is caught, and makes a
// context on the third through the context row.
#include <dlfcn.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string_view>
#include <utility>

#include "allocation_log.h"
#include "cuda_declarations.h"

using gpuleak::EntryPoint;
using gpuleak::Library;
using gpuleak::ResultOf;
using gpuleak::StreamMode;

namespace {

// What a lookup needs to know about a row, and the row's function type.
template <EntryPoint row> struct Row;
#define API_FAMILIES_ROW_(lib, sym, base_name, since_version, stream_mode, params)                           \
    template <> struct Row<EntryPoint::sym> {                                                                \
        using Function = ResultOf<Library::lib>(*) params;                                                   \
        static constexpr Library library = Library::lib;                                                     \
        static constexpr const char* symbol = #sym;                                                          \
        static constexpr const char* base = #base_name;                                                      \
        static constexpr int since = since_version;                                                          \
        static constexpr StreamMode streams = StreamMode::stream_mode;                                       \
        static Function exported() { return &::sym; }                                                        \
    };
#define GPULEAK_ALLOC(lib, sym, base, since, streams, kind, params, ...)                                     \
    API_FAMILIES_ROW_(lib, sym, base, since, streams, params)
#define GPULEAK_FREE(lib, sym, base, since, streams, space, params, ...)                                     \
    API_FAMILIES_ROW_(lib, sym, base, since, streams, params)
#define GPULEAK_FREE_RANGE(lib, sym, base, since, streams, space, params, ...)                               \
    API_FAMILIES_ROW_(lib, sym, base, since, streams, params)
#define GPULEAK_TRIM(lib, sym, base, since, streams, params, ...)                                            \
    API_FAMILIES_ROW_(lib, sym, base, since, streams, params)
#define GPULEAK_CONTEXT(lib, sym, base, since, streams, params, ...)                                         \
    API_FAMILIES_ROW_(lib, sym, base, since, streams, params)
#include "gpuleak/cuda_entry_points.def"
#undef API_FAMILIES_ROW_

enum class Path {
    Symbol,
    CuGetProcAddress,
    CuGetProcAddressV2,
    DriverEntryPoint,
    DriverEntryPointPtsz,
    DriverEntryPointByVersion,
    DriverEntryPointByVersionPtsz,
    DlsymHandle,
};

constexpr std::pair<std::string_view, Path> kPaths[] = {
    {"symbol", Path::Symbol},
    {"cuGetProcAddress", Path::CuGetProcAddress},
    {"cuGetProcAddress_v2", Path::CuGetProcAddressV2},
    {"cudaGetDriverEntryPoint", Path::DriverEntryPoint},
    {"cudaGetDriverEntryPoint_ptsz", Path::DriverEntryPointPtsz},
    {"cudaGetDriverEntryPointByVersion", Path::DriverEntryPointByVersion},
    {"cudaGetDriverEntryPointByVersion_ptsz", Path::DriverEntryPointByVersionPtsz},
    {"dlsym_handle", Path::DlsymHandle},
};

constexpr int kDevice = 1;
// A device the program uses only through the context row: its context is the one the row makes.
constexpr int kContextDevice = 2;
constexpr unsigned int kMemAttachGlobal = 1;
constexpr size_t kVmmGranule = size_t{2} << 20;

// A size no other row uses: an event attributed to the wrong row cannot match by accident.
size_t distinctive_size(EntryPoint row) {
    return (static_cast<size_t>(row) + 1) * 4096 + 64;
}

template <class T> unsigned long long as_u64(T* pointer) {
    return reinterpret_cast<uintptr_t>(pointer);
}
unsigned long long as_u64(unsigned long long value) {
    return value;
}

// One set of flags serves the driver's lookups and the runtime's.
static_assert(cudaEnableLegacyStream == CU_GET_PROC_ADDRESS_LEGACY_STREAM &&
              cudaEnablePerThreadDefaultStream == CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM);

// The flags that ask a lookup for the row's own stream variant. The _ptsz lookups' default already
// means the per-thread variants, so there the legacy ones must be asked for.
unsigned long long lookup_flags(StreamMode streams, bool per_thread_lookup) {
    switch (streams) {
    case StreamMode::PER_THREAD_STREAM:
        return per_thread_lookup ? cudaEnableDefault : cudaEnablePerThreadDefaultStream;
    case StreamMode::LEGACY_STREAM:
        return cudaEnableLegacyStream;
    case StreamMode::NO_STREAM:
        break;
    }
    return cudaEnableDefault;
}

class Families {
  public:
    Families(Path path, std::string_view path_name, const AllocationLog& log)
        : path_(path), path_name_(path_name), log_(log) {}

    int run() {
        setup();
        if (path_ == Path::Symbol || path_ == Path::DlsymHandle)
            runtime_rows();
        driver_rows();
        context_row();
        check(cudaStreamDestroy(stream_), "cudaStreamDestroy");
        std::printf("api_families %.*s: %d allocations, %d frees, %d trims\n",
                    static_cast<int>(path_name_.size()), path_name_.data(), allocations_, frees_, trims_);
        return 0;
    }

  private:
    void check(int rc, const char* call) {
        log_.line("call %s rc=%d", call, rc);
        if (rc != 0)
            std::exit(1);
    }

    void setup() {
        check(cudaSetDevice(kDevice), "cudaSetDevice");
        check(cudaStreamCreate(&stream_), "cudaStreamCreate");
        check(cudaDeviceGetDefaultMemPool(&runtime_pool_, kDevice), "cudaDeviceGetDefaultMemPool");
        check(cuDeviceGetDefaultMemPool(&driver_pool_, kDevice), "cuDeviceGetDefaultMemPool");
    }

    void* library_handle(Library library) {
        const char* soname = library == Library::RUNTIME ? "libcudart.so.13" : "libcuda.so.1";
        void* handle = dlopen(soname, RTLD_NOW | RTLD_LOCAL);
        if (handle == nullptr) {
            log_.line("call dlopen name=%s found=0", soname);
            std::exit(1);
        }
        return handle;
    }

    void* look_up_driver(const char* base, int version, StreamMode streams) {
        void* function = nullptr;
        int status = 0;
        int rc = 0;
        const unsigned long long flags = lookup_flags(streams, false);
        const unsigned long long ptsz_flags = lookup_flags(streams, true);
        switch (path_) {
        case Path::CuGetProcAddress:
            rc = cuGetProcAddress(base, &function, version, flags);
            break;
        case Path::CuGetProcAddressV2:
            rc = cuGetProcAddress_v2(base, &function, version, flags, &status);
            break;
        case Path::DriverEntryPoint:
            rc = cudaGetDriverEntryPoint(base, &function, flags, &status);
            break;
        case Path::DriverEntryPointPtsz:
            rc = cudaGetDriverEntryPoint_ptsz(base, &function, ptsz_flags, &status);
            break;
        case Path::DriverEntryPointByVersion:
            rc = cudaGetDriverEntryPointByVersion(base, &function, static_cast<unsigned>(version), flags,
                                                  &status);
            break;
        case Path::DriverEntryPointByVersionPtsz:
            rc = cudaGetDriverEntryPointByVersion_ptsz(base, &function, static_cast<unsigned>(version),
                                                       ptsz_flags, &status);
            break;
        case Path::Symbol:
        case Path::DlsymHandle:
            break;
        }
        log_.line("call %.*s base=%s version=%d rc=%d status=%d found=%d",
                  static_cast<int>(path_name_.size()), path_name_.data(), base, version, rc, status,
                  function != nullptr);
        return function;
    }

    template <EntryPoint row> typename Row<row>::Function get() {
        using R = Row<row>;
        if (path_ == Path::Symbol)
            return R::exported();
        void* function = path_ == Path::DlsymHandle ? dlsym(library_handle(R::library), R::symbol)
                                                    : look_up_driver(R::base, R::since, R::streams);
        if (function == nullptr) {
            log_.line("missing %s", R::symbol);
            std::exit(1);
        }
        return reinterpret_cast<typename R::Function>(function);
    }

    template <EntryPoint row>
    void log_alloc(int rc, unsigned long long address, size_t size, size_t requested, CUstream stream) {
        log_.line("alloc %s rc=%d address=0x%llx size=%zu requested=%zu stream=0x%llx", Row<row>::symbol, rc,
                  address, size, requested, as_u64(stream));
        allocations_ += rc == 0;
    }

    template <EntryPoint row>
    void log_free(int rc, unsigned long long address, size_t size, CUstream stream) {
        log_.line("free %s rc=%d address=0x%llx size=%zu stream=0x%llx", Row<row>::symbol, rc, address, size,
                  as_u64(stream));
        frees_ += rc == 0;
    }

    // The families whose allocation writes a pointer through its first argument (of type Out) from a
    // size in its second; `extra` are the arguments after those. `stream` is the one the free gets.
    template <EntryPoint alloc_row, EntryPoint free_row, class Out, class... Extra>
    void allocate_and_free(CUstream stream, Extra... extra) {
        const size_t size = distinctive_size(alloc_row);
        Out out{};
        const int rc = get<alloc_row>()(&out, size, extra...);
        log_alloc<alloc_row>(rc, as_u64(out), size, size, stream);
        if (rc != 0)
            return;
        int free_rc = 0;
        if constexpr (Row<free_row>::streams == StreamMode::NO_STREAM)
            free_rc = get<free_row>()(out);
        else
            free_rc = get<free_row>()(out, stream);
        log_free<free_row>(free_rc, as_u64(out), 0, stream);
    }

    template <EntryPoint row, class Pool> void trim(Pool pool) {
        const size_t keep = distinctive_size(row);
        const int rc = get<row>()(pool, keep);
        log_.line("trim %s rc=%d address=0x%llx size=%zu", Row<row>::symbol, rc, as_u64(pool), keep);
        trims_ += rc == 0;
    }

    void runtime_rows() {
        allocate_and_free<EntryPoint::cudaMalloc, EntryPoint::cudaFree, void*>(nullptr);
        allocate_and_free<EntryPoint::cudaMallocManaged, EntryPoint::cudaFree, void*>(nullptr,
                                                                                      kMemAttachGlobal);
        allocate_and_free<EntryPoint::cudaMallocHost, EntryPoint::cudaFreeHost, void*>(nullptr);
        allocate_and_free<EntryPoint::cudaHostAlloc, EntryPoint::cudaFreeHost, void*>(nullptr, 0u);
        allocate_and_free<EntryPoint::cudaMallocAsync, EntryPoint::cudaFreeAsync, void*>(stream_, stream_);
        allocate_and_free<EntryPoint::cudaMallocAsync_ptsz, EntryPoint::cudaFreeAsync_ptsz, void*>(stream_,
                                                                                                   stream_);
        allocate_and_free<EntryPoint::cudaMallocFromPoolAsync, EntryPoint::cudaFreeAsync, void*>(
            stream_, runtime_pool_, stream_);
        allocate_and_free<EntryPoint::cudaMallocFromPoolAsync_ptsz, EntryPoint::cudaFreeAsync_ptsz, void*>(
            stream_, runtime_pool_, stream_);
        runtime_pitched();
        trim<EntryPoint::cudaMemPoolTrimTo>(runtime_pool_);
    }

    void runtime_pitched() {
        const size_t width = 1000 + static_cast<size_t>(EntryPoint::cudaMallocPitch);
        const size_t height = 3;
        void* pointer = nullptr;
        size_t pitch = 0;
        int rc = get<EntryPoint::cudaMallocPitch>()(&pointer, &pitch, width, height);
        log_alloc<EntryPoint::cudaMallocPitch>(rc, as_u64(pointer), pitch * height, width * height, nullptr);
        if (rc == 0)
            log_free<EntryPoint::cudaFree>(get<EntryPoint::cudaFree>()(pointer), as_u64(pointer), 0, nullptr);

        const cudaExtent extent{700 + static_cast<size_t>(EntryPoint::cudaMalloc3D), 3, 2};
        cudaPitchedPtr pitched{};
        rc = get<EntryPoint::cudaMalloc3D>()(&pitched, extent);
        log_alloc<EntryPoint::cudaMalloc3D>(rc, as_u64(pitched.ptr),
                                            pitched.pitch * extent.height * extent.depth,
                                            extent.width * extent.height * extent.depth, nullptr);
        if (rc == 0)
            log_free<EntryPoint::cudaFree>(get<EntryPoint::cudaFree>()(pitched.ptr), as_u64(pitched.ptr), 0,
                                           nullptr);
    }

    void driver_rows() {
        allocate_and_free<EntryPoint::cuMemAlloc_v2, EntryPoint::cuMemFree_v2, CUdeviceptr>(nullptr);
        allocate_and_free<EntryPoint::cuMemAllocManaged, EntryPoint::cuMemFree_v2, CUdeviceptr>(
            nullptr, kMemAttachGlobal);
        allocate_and_free<EntryPoint::cuMemAllocHost_v2, EntryPoint::cuMemFreeHost, void*>(nullptr);
        allocate_and_free<EntryPoint::cuMemHostAlloc, EntryPoint::cuMemFreeHost, void*>(nullptr, 0u);
        allocate_and_free<EntryPoint::cuMemAllocAsync, EntryPoint::cuMemFreeAsync, CUdeviceptr>(stream_,
                                                                                                stream_);
        allocate_and_free<EntryPoint::cuMemAllocAsync_ptsz, EntryPoint::cuMemFreeAsync_ptsz, CUdeviceptr>(
            stream_, stream_);
        allocate_and_free<EntryPoint::cuMemAllocFromPoolAsync, EntryPoint::cuMemFreeAsync, CUdeviceptr>(
            stream_, driver_pool_, stream_);
        allocate_and_free<EntryPoint::cuMemAllocFromPoolAsync_ptsz, EntryPoint::cuMemFreeAsync_ptsz,
                          CUdeviceptr>(stream_, driver_pool_, stream_);
        driver_pitched();
        host_registration();
        virtual_memory();
        trim<EntryPoint::cuMemPoolTrimTo>(driver_pool_);
    }

    void driver_pitched() {
        const size_t width = 1000 + static_cast<size_t>(EntryPoint::cuMemAllocPitch_v2);
        const size_t height = 5;
        CUdeviceptr pointer = 0;
        size_t pitch = 0;
        const int rc = get<EntryPoint::cuMemAllocPitch_v2>()(&pointer, &pitch, width, height, 4);
        log_alloc<EntryPoint::cuMemAllocPitch_v2>(rc, pointer, pitch * height, width * height, nullptr);
        if (rc == 0)
            log_free<EntryPoint::cuMemFree_v2>(get<EntryPoint::cuMemFree_v2>()(pointer), pointer, 0, nullptr);
    }

    // Memory the program owns, pinned and unpinned again.
    void host_registration() {
        const size_t size = distinctive_size(EntryPoint::cuMemHostRegister_v2);
        void* memory = std::malloc(size);
        const int rc = get<EntryPoint::cuMemHostRegister_v2>()(memory, size, 0);
        log_alloc<EntryPoint::cuMemHostRegister_v2>(rc, as_u64(memory), size, size, nullptr);
        if (rc == 0)
            log_free<EntryPoint::cuMemHostUnregister>(get<EntryPoint::cuMemHostUnregister>()(memory),
                                                      as_u64(memory), 0, nullptr);
        std::free(memory);
    }

    // The expandable-segments sequence: reserve, create, map, unmap, release, free the reservation.
    // Three different sizes (granule multiples) tell the three objects apart.
    void virtual_memory() {
        const size_t reserved = 4 * kVmmGranule;
        const size_t created = 3 * kVmmGranule;
        const size_t mapped = 2 * kVmmGranule;
        CUdeviceptr base = 0;
        int rc = get<EntryPoint::cuMemAddressReserve>()(&base, reserved, 0, 0, 0);
        log_alloc<EntryPoint::cuMemAddressReserve>(rc, base, reserved, reserved, nullptr);
        CUmemAllocationProp prop{};
        prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
        prop.location = {CU_MEM_LOCATION_TYPE_DEVICE, kDevice};
        CUmemGenericAllocationHandle handle = 0;
        rc = get<EntryPoint::cuMemCreate>()(&handle, created, &prop, 0);
        log_alloc<EntryPoint::cuMemCreate>(rc, handle, created, created, nullptr);
        rc = get<EntryPoint::cuMemMap>()(base, mapped, 0, handle, 0);
        // The trace records the handle a mapping maps where other calls have their stream.
        log_alloc<EntryPoint::cuMemMap>(rc, base, mapped, mapped, reinterpret_cast<CUstream>(handle));
        log_free<EntryPoint::cuMemUnmap>(get<EntryPoint::cuMemUnmap>()(base, mapped), base, mapped, nullptr);
        log_free<EntryPoint::cuMemRelease>(get<EntryPoint::cuMemRelease>()(handle), handle, 0, nullptr);
        log_free<EntryPoint::cuMemAddressFree>(get<EntryPoint::cuMemAddressFree>()(base, reserved), base,
                                               reserved, nullptr);
    }

    void context_row() {
        CUcontext context = nullptr;
        const int rc = get<EntryPoint::cuDevicePrimaryCtxRetain>()(&context, kContextDevice);
        log_.line("context %s rc=%d device=%d", Row<EntryPoint::cuDevicePrimaryCtxRetain>::symbol, rc,
                  kContextDevice);
        if (rc == 0)
            check(cuDevicePrimaryCtxRelease_v2(kContextDevice), "cuDevicePrimaryCtxRelease_v2");
    }

    Path path_;
    std::string_view path_name_;
    const AllocationLog& log_;
    CUstream stream_ = nullptr;
    cudaMemPool_t runtime_pool_ = nullptr;
    CUmemoryPool driver_pool_ = nullptr;
    int allocations_ = 0;
    int frees_ = 0;
    int trims_ = 0;
};

} // namespace

int main(int argc, char** argv) {
    if (argc < 3) {
        std::fprintf(stderr, "usage: api_families <log> <path>\n");
        return 2;
    }
    const AllocationLog log(argv[1]);
    const std::string_view wanted = argv[2];
    for (const auto& [name, path] : kPaths)
        if (name == wanted)
            return Families(path, name, log).run();
    std::fprintf(stderr, "api_families: unknown path '%s'\n", argv[2]);
    return 2;
}
