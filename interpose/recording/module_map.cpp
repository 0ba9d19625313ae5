#include "recording/module_map.h"

#include "recording/host_memory_reader.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dlfcn.h>
#include <elf.h>
#include <link.h>
#include <sys/mman.h>
#include <unistd.h>

namespace gpuleak {

namespace {

struct Visit {
    ModuleMap* map;
    char cuda_libraries[4][512];
    uint32_t cuda_library_count;
};

bool is_cuda_library(const char* path) {
    const char* slash = std::strrchr(path, '/');
    const char* name = slash != nullptr ? slash + 1 : path;
    return std::strncmp(name, "libcudart.so", 12) == 0 || std::strncmp(name, "libcuda.so", 10) == 0;
}

} // namespace

int ModuleMap::visit(dl_phdr_info* info, size_t, void* data) {
    auto* visit = static_cast<Visit*>(data);
    ModuleMap& map = *visit->map;
    const AddressRange range = loaded_range(*info);
    if (range.high == 0 || map.known(range.low) || map.range_count_ >= ModuleMap::kMaxModules)
        return 0;

    // The main program has no name here: /proc/self/exe has it. A relative name (a relative LD_PRELOAD
    // or dlopen path) means nothing once the process and its working directory are gone: made absolute.
    char path[4096];
    const char* name = info->dlpi_name;
    if (name == nullptr || name[0] == '\0') {
        ssize_t n = ::readlink("/proc/self/exe", path, sizeof path - 1);
        path[n > 0 ? n : 0] = '\0';
    } else if (name[0] == '/' || std::strchr(name, '/') == nullptr || ::realpath(name, path) == nullptr) {
        std::snprintf(path, sizeof path, "%s", name);
    }
    const size_t path_length = std::strlen(path);
    if (is_cuda_library(path) && visit->cuda_library_count < 4 &&
        path_length < sizeof visit->cuda_libraries[0])
        std::memcpy(visit->cuda_libraries[visit->cuda_library_count++], path, path_length + 1);
    const auto path_bytes = static_cast<uint32_t>(path_length);
    const uint32_t bytes =
        static_cast<uint32_t>((sizeof(format::ModuleRecord) + path_bytes + 1 + 7) & ~size_t{7});
    // A module that does not fit is still remembered below, so that new stacks do not rescan for it.
    map.writer_->append_record(TraceWriter::Stream::Modules, bytes, [&](uint8_t* body) {
        auto* record = reinterpret_cast<format::ModuleRecord*>(body - sizeof(format::RecordPrefix));
        record->load_address = info->dlpi_addr;
        record->low = range.low;
        record->high = range.high;
        record->build_id_bytes = find_build_id(info, record->build_id, sizeof record->build_id);
        record->path_bytes = path_bytes;
        std::memcpy(record + 1, path, path_bytes + 1);
    });
    map.ranges_[map.range_count_++] = range;
    return 0;
}

bool ModuleMap::attach(TraceWriter& writer) {
    writer_ = &writer;
    lock_.reset_after_fork();
    void* memory = ::mmap(nullptr, kMaxModules * sizeof(AddressRange), PROT_READ | PROT_WRITE,
                          MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    ranges_ = memory == MAP_FAILED ? nullptr : static_cast<AddressRange*>(memory);
    range_count_ = 0;
    if (ranges_ == nullptr)
        return false;
    SpinGuard guard(lock_);
    refresh();
    return true;
}

void ModuleMap::detach() {
    if (ranges_ != nullptr)
        ::munmap(ranges_, kMaxModules * sizeof(AddressRange));
    ranges_ = nullptr;
    range_count_ = 0;
    writer_ = nullptr;
    lock_.reset_after_fork();
}

bool ModuleMap::known(uint64_t address) const {
    for (uint32_t i = 0; i < range_count_; ++i)
        if (ranges_[i].contains(address))
            return true;
    return false;
}

void ModuleMap::refresh() {
    Visit visit{};
    visit.map = this;
    dl_iterate_phdr(ModuleMap::visit, &visit);
    // Only the simulated device defines this symbol; the real libraries never do. Looked up after
    // dl_iterate_phdr, inside which the dynamic loader must not be entered. The libraries may have
    // been loaded RTLD_LOCAL (ctypes, the runtime's own dlopen of the driver), hence per handle.
    for (uint32_t i = 0; i < visit.cuda_library_count; ++i) {
        void* handle = dlopen(visit.cuda_libraries[i], RTLD_LAZY | RTLD_NOLOAD);
        if (handle == nullptr)
            continue;
        if (dlsym(handle, "gpuleak_simulated_device") != nullptr)
            __atomic_fetch_or(&writer_->header()->flags,
                              static_cast<uint32_t>(format::HeaderFlag::SimulatedDevice), __ATOMIC_RELAXED);
        // The simulated driver only: its device memory is the process's, which the host samples take off.
        if (void* residency = dlsym(handle, "gpuleak_sim_device_resident_bytes"))
            set_simulated_residency(reinterpret_cast<SimulatedResidency>(residency));
        dlclose(handle);
    }
}

void ModuleMap::cover(const uint64_t* frames, uint32_t count) {
    if (ranges_ == nullptr)
        return;
    SpinGuard guard(lock_);
    for (uint32_t i = 0; i < count; ++i) {
        if (!known(frames[i])) {
            refresh();
            return;
        }
    }
}

} // namespace gpuleak
