#include "recording/host_memory_reader.h"

#include "common/cgroup_paths.h"
#include "common/file_bytes.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <dlfcn.h>
#include <malloc.h>
#include <unistd.h>

namespace gpuleak {

using format::HostField;

namespace {

constexpr size_t kTextBytes = 4096;
// cgroup v1 says "no limit" with the largest page counter in bytes (9223372036854771712).
constexpr uint64_t kUnlimited = uint64_t{1} << 62;

// The file's text, NUL-terminated and cut at `capacity - 1` bytes; false when it cannot be read.
bool read_text(const char* path, char* text, size_t capacity) {
    const size_t used = read_file_bytes(path, text, capacity - 1);
    text[used] = '\0';
    return used > 0;
}

// A file holding one number (cgroup files); "max" is no limit.
bool read_number(const char* path, uint64_t& value) {
    char text[64];
    if (!read_text(path, text, sizeof text))
        return false;
    if (std::strncmp(text, "max", 3) == 0) {
        value = UINT64_MAX;
        return true;
    }
    if (text[0] < '0' || text[0] > '9')
        return false;
    value = std::strtoull(text, nullptr, 10);
    return true;
}

// glibc's since 2.33, looked up once when the library loads (not in a forked child, nor with a
// program's locks held); null under another C library, where free memory is not counted.
using HeapStatistics = struct mallinfo2 (*)();
const HeapStatistics g_heap_statistics = reinterpret_cast<HeapStatistics>(dlsym(RTLD_DEFAULT, "mallinfo2"));

bool exists(const char* path) {
    return ::access(path, R_OK) == 0;
}

SimulatedResidency g_simulated_residency = nullptr;

} // namespace

void set_simulated_residency(SimulatedResidency reader) {
    __atomic_store_n(&g_simulated_residency, reader, __ATOMIC_RELEASE);
}

uint64_t PacedReading::thread_cpu_ns() {
    timespec now{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now);
    return static_cast<uint64_t>(now.tv_sec) * 1000000000ull + static_cast<uint64_t>(now.tv_nsec);
}

namespace {

// What follows "key<separator>" on the line that starts with it; nullptr when no line does.
const char* value_after(const char* text, const char* key, char separator) {
    const size_t key_length = std::strlen(key);
    for (const char* line = text; line != nullptr && *line != '\0';) {
        if (std::strncmp(line, key, key_length) == 0 && line[key_length] == separator)
            return line + key_length + 1;
        line = std::strchr(line, '\n');
        if (line != nullptr)
            ++line;
    }
    return nullptr;
}

} // namespace

bool stat_field(const char* text, const char* key, uint64_t& value) {
    const char* digits = value_after(text, key, ' ');
    if (digits == nullptr)
        return false;
    char* end = nullptr;
    const unsigned long long parsed = std::strtoull(digits, &end, 10);
    if (end == digits)
        return false;
    value = parsed;
    return true;
}

bool proc_field_bytes(const char* text, const char* key, uint64_t& bytes) {
    const char* digits = value_after(text, key, ':');
    if (digits == nullptr)
        return false;
    char* end = nullptr;
    const unsigned long long value = std::strtoull(digits, &end, 10);
    if (end == digits)
        return false;
    while (*end == ' ')
        ++end;
    bytes = std::strncmp(end, "kB", 2) == 0 ? value * 1024 : value;
    return true;
}

namespace {

struct CgroupKind {
    const char* usage;
    const char* limit;
    const char* inactive_file; // memory.stat's line of page cache the kernel reclaims first
};
constexpr CgroupKind kV2{"memory.current", "memory.max", "inactive_file"};
constexpr CgroupKind kV1{"memory.usage_in_bytes", "memory.limit_in_bytes", "total_inactive_file"};

bool place_files(const char* directory, const CgroupKind& kind, CgroupFiles& files) {
    const int a = std::snprintf(files.usage, sizeof files.usage, "%s/%s", directory, kind.usage);
    const int b = std::snprintf(files.limit, sizeof files.limit, "%s/%s", directory, kind.limit);
    const int c = std::snprintf(files.stat, sizeof files.stat, "%s/memory.stat", directory);
    files.inactive_file_key = kind.inactive_file;
    return a > 0 && static_cast<size_t>(a) < sizeof files.usage && b > 0 &&
           static_cast<size_t>(b) < sizeof files.limit && c > 0 && static_cast<size_t>(c) < sizeof files.stat;
}

uint64_t limit_of(const char* directory, const CgroupKind& kind) {
    char path[600];
    uint64_t limit = UINT64_MAX;
    std::snprintf(path, sizeof path, "%s/%s", directory, kind.limit);
    return read_number(path, limit) ? limit : UINT64_MAX;
}

} // namespace

bool find_cgroup_memory_files(const char* proc_self_cgroup, const char* root, CgroupFiles& files) {
    CgroupDirectories directories{};
    memory_cgroup_directories(proc_self_cgroup, root, directories);
    char v2_top[512];
    char v1_top[512];
    std::snprintf(v2_top, sizeof v2_top, "%s", root);
    std::snprintf(v1_top, sizeof v1_top, "%s/memory", root);
    struct Candidate {
        const char* directory;
        const char* top; // of its hierarchy: its ancestors are those below
        const CgroupKind& kind;
    };
    const Candidate candidates[] = {
        {directories.v2, v2_top, kV2},
        {directories.v1, v1_top, kV1},
        {directories.v2[0] != '\0' ? v2_top : "", v2_top, kV2},
        {directories.v1[0] != '\0' ? v1_top : "", v1_top, kV1},
    };
    for (const Candidate& candidate : candidates) {
        if (candidate.directory[0] == '\0' || !place_files(candidate.directory, candidate.kind, files) ||
            !exists(files.usage))
            continue;
        // The OOM killer acts in the cgroup whose limit is reached: of this one and its ancestors (a
        // Slurm job, a systemd slice), the one with the least room.
        char directory[512];
        std::snprintf(directory, sizeof directory, "%s", candidate.directory);
        char tightest[512];
        std::snprintf(tightest, sizeof tightest, "%s", candidate.directory);
        uint64_t least = limit_of(directory, candidate.kind);
        const size_t top = std::strlen(candidate.top);
        for (char* slash = std::strrchr(directory, '/');
             slash != nullptr && static_cast<size_t>(slash - directory) >= top;
             slash = std::strrchr(directory, '/')) {
            *slash = '\0';
            const uint64_t limit = limit_of(directory, candidate.kind);
            if (limit < least) {
                least = limit;
                std::snprintf(tightest, sizeof tightest, "%s", directory);
            }
        }
        return place_files(tightest, candidate.kind, files);
    }
    return false;
}

uint64_t machine_memory_bytes() {
    char text[kTextBytes];
    uint64_t total = 0;
    if (read_text("/proc/meminfo", text, sizeof text))
        proc_field_bytes(text, "MemTotal", total);
    return total;
}

void HostMemoryReader::open() {
    char text[kTextBytes];
    has_cgroup_ = read_text("/proc/self/cgroup", text, sizeof text) &&
                  find_cgroup_memory_files(text, "/sys/fs/cgroup", cgroup_);
    proportional_ = PacedReading(kProportionalBudget);
    has_proportional_ = false;
    heap_ = PacedReading(kHeapBudget);
    heap_time_ns_ = 0;
    heap_lock_.reset_after_fork();
    simulated_resident_ = UINT64_MAX;
}

void HostMemoryReader::read_heap(uint64_t now_ns) {
    if (g_heap_statistics == nullptr || !heap_lock_.try_lock())
        return;
    SpinGuard guard(heap_lock_, std::adopt_lock);
    if (heap_.due(now_ns)) {
        heap_.take(now_ns, [&] {
            __atomic_store_n(&heap_free_, g_heap_statistics().fordblks, __ATOMIC_RELAXED);
            __atomic_store_n(&heap_time_ns_, now_ns, __ATOMIC_RELEASE);
        });
    }
}

void HostMemoryReader::read(format::HostSample& sample, uint64_t& rss, uint64_t now_ns, SampleMoment moment) {
    char text[kTextBytes];
    sample = {};
    rss = 0;
    if (read_text("/proc/self/status", text, sizeof text)) {
        proc_field_bytes(text, "VmRSS", rss);
        if (proc_field_bytes(text, "RssAnon", sample.rss_anon) &&
            proc_field_bytes(text, "RssFile", sample.rss_file) &&
            proc_field_bytes(text, "RssShmem", sample.rss_shmem)) {
            proc_field_bytes(text, "VmSwap", sample.swap);
            sample.fields |= static_cast<uint32_t>(HostField::Status);
        }
    }
    if (moment != SampleMoment::Fork &&
        ((moment == SampleMoment::Exit && proportional_.last_cost_ns() <= kMostLastProportionalNs) ||
         proportional_.due(now_ns))) {
        proportional_.take(now_ns, [&] {
            uint64_t clean = 0;
            uint64_t dirty = 0;
            if (read_text("/proc/self/smaps_rollup", text, sizeof text) &&
                proc_field_bytes(text, "Pss", pss_) && proc_field_bytes(text, "Private_Clean", clean) &&
                proc_field_bytes(text, "Private_Dirty", dirty)) {
                uss_ = clean + dirty;
                proportional_time_ns_ = now_ns;
                has_proportional_ = true;
            }
        });
    }
    if (has_proportional_) {
        sample.uss = uss_;
        sample.pss = pss_;
        sample.proportional_time_ns = proportional_time_ns_;
        sample.fields |= static_cast<uint32_t>(HostField::Proportional);
    }
    const uint64_t heap_time_ns = __atomic_load_n(&heap_time_ns_, __ATOMIC_ACQUIRE);
    if (heap_time_ns != 0) {
        sample.heap_free = __atomic_load_n(&heap_free_, __ATOMIC_RELAXED);
        sample.heap_time_ns = heap_time_ns;
        sample.fields |= static_cast<uint32_t>(HostField::HeapFree);
    }
    const SimulatedResidency residency =
        moment == SampleMoment::Fork ? nullptr : __atomic_load_n(&g_simulated_residency, __ATOMIC_ACQUIRE);
    if (residency != nullptr) {
        const std::size_t resident = residency();
        if (resident != SIZE_MAX)
            simulated_resident_ = resident;
        if (simulated_resident_ != UINT64_MAX) {
            sample.simulated_device_resident_pages = static_cast<uint32_t>(
                std::min<uint64_t>(simulated_resident_ / format::kResidentPageBytes, UINT32_MAX));
            sample.fields |= static_cast<uint32_t>(HostField::SimulatedDeviceResident);
        }
    }
    if (has_cgroup_ && read_number(cgroup_.usage, sample.cgroup_bytes)) {
        // Its working set, as the OOM killer weighs it: less the page cache the kernel reclaims first.
        uint64_t inactive_file = 0;
        if (read_text(cgroup_.stat, text, sizeof text) &&
            stat_field(text, cgroup_.inactive_file_key, inactive_file))
            sample.cgroup_bytes =
                sample.cgroup_bytes > inactive_file ? sample.cgroup_bytes - inactive_file : 0;
        sample.fields |= static_cast<uint32_t>(HostField::Cgroup);
        uint64_t limit = 0;
        if (read_number(cgroup_.limit, limit) && limit < kUnlimited) {
            sample.cgroup_limit_bytes = limit;
            sample.fields |= static_cast<uint32_t>(HostField::CgroupLimit);
        }
    }
    if (read_text("/proc/meminfo", text, sizeof text) &&
        proc_field_bytes(text, "MemAvailable", sample.available_bytes))
        sample.fields |= static_cast<uint32_t>(HostField::Available);
}

} // namespace gpuleak
