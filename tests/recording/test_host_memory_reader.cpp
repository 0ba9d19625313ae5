#include <catch2/catch.hpp>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "common/cgroup_paths.h"
#include "recording/host_memory_reader.h"
#include "temp_dir.h"

namespace fs = std::filesystem;

using gpuleak::HostMemoryReader;
using gpuleak::SampleMoment;
using gpuleak::format::HostField;
using gpuleak::format::HostSample;

namespace {

constexpr uint64_t kKiB = 1024;

bool has(const HostSample& sample, HostField field) {
    return (sample.fields & static_cast<uint32_t>(field)) != 0;
}

} // namespace

TEST_CASE("a /proc field is read by its whole key, in bytes") {
    const char* status = "Name:\tpython3\nVmRSS:\t  563000 kB\nRssAnon:\t  400 kB\nRssFile:\t 100 kB\n"
                         "RssShmem:\t       0 kB\nThreads:\t3\n";
    uint64_t bytes = 0;
    CHECK(gpuleak::proc_field_bytes(status, "VmRSS", bytes));
    CHECK(bytes == 563000 * kKiB);
    CHECK(gpuleak::proc_field_bytes(status, "RssShmem", bytes));
    CHECK(bytes == 0);
    CHECK(gpuleak::proc_field_bytes(status, "Threads", bytes));
    CHECK(bytes == 3);
    CHECK_FALSE(gpuleak::proc_field_bytes(status, "Rss", bytes));
    CHECK_FALSE(gpuleak::proc_field_bytes(status, "VmSwap", bytes));
    const char* rollup = "Rss:  1700 kB\nPss:   803 kB\nPss_Dirty:   112 kB\n";
    CHECK(gpuleak::proc_field_bytes(rollup, "Pss", bytes));
    CHECK(bytes == 803 * kKiB);
}

TEST_CASE("the memory cgroup's directories are found for cgroup v1 and v2") {
    gpuleak::CgroupDirectories directories{};
    SECTION("v2") {
        gpuleak::memory_cgroup_directories("0::/user.slice/session-3.scope\n", "/sys/fs/cgroup", directories);
        CHECK(std::string(directories.v2) == "/sys/fs/cgroup/user.slice/session-3.scope");
        CHECK(std::string(directories.v1).empty());
    }
    SECTION("v2 at the top of a namespace") {
        gpuleak::memory_cgroup_directories("0::/\n", "/sys/fs/cgroup", directories);
        CHECK(std::string(directories.v2) == "/sys/fs/cgroup");
    }
    SECTION("v1, its memory controller alone or with others") {
        gpuleak::memory_cgroup_directories("9:name=systemd:/\n4:memory:/process_api/abc\n0::/\n",
                                           "/sys/fs/cgroup", directories);
        CHECK(std::string(directories.v1) == "/sys/fs/cgroup/memory/process_api/abc");
        CHECK(std::string(directories.v2) == "/sys/fs/cgroup");
        gpuleak::memory_cgroup_directories("3:cpu,memory:/job", "/sys/fs/cgroup", directories);
        CHECK(std::string(directories.v1) == "/sys/fs/cgroup/memory/job");
        gpuleak::memory_cgroup_directories("3:cpu,memoryless:/job", "/sys/fs/cgroup", directories);
        CHECK(std::string(directories.v1).empty());
    }
    SECTION("none") {
        gpuleak::memory_cgroup_directories("5:devices:/\n", "/sys/fs/cgroup", directories);
        CHECK(std::string(directories.v1).empty());
        CHECK(std::string(directories.v2).empty());
    }
}

TEST_CASE("the usage and limit files are those that exist, v2's first, a namespace's top last") {
    TempDir dir;
    const std::string root = dir.path();
    fs::create_directories(root + "/memory/job");
    std::ofstream(root + "/memory/job/memory.usage_in_bytes") << "1000\n";
    gpuleak::CgroupFiles files{};
    REQUIRE(gpuleak::find_cgroup_memory_files("4:memory:/job\n0::/\n", root.c_str(), files));
    CHECK(std::string(files.usage) == root + "/memory/job/memory.usage_in_bytes");
    CHECK(std::string(files.limit) == root + "/memory/job/memory.limit_in_bytes");
    // The host's path in a container: only the top is mounted.
    std::ofstream(root + "/memory.current") << "1000\n";
    REQUIRE(gpuleak::find_cgroup_memory_files("0::/docker/abc\n", root.c_str(), files));
    CHECK(std::string(files.usage) == root + "/memory.current");
    CHECK_FALSE(gpuleak::find_cgroup_memory_files("5:devices:/\n", root.c_str(), files));
}

TEST_CASE("of a cgroup and its ancestors, the one with the least room is the one the OOM killer acts in") {
    TempDir dir;
    const std::string root = dir.path();
    fs::create_directories(root + "/memory/slice/job");
    std::ofstream(root + "/memory/slice/job/memory.usage_in_bytes") << "1000\n";
    std::ofstream(root + "/memory/slice/job/memory.limit_in_bytes") << "9223372036854771712\n";
    std::ofstream(root + "/memory/slice/memory.limit_in_bytes") << "1073741824\n";
    std::ofstream(root + "/memory/memory.limit_in_bytes") << "9223372036854771712\n";
    gpuleak::CgroupFiles files{};
    REQUIRE(gpuleak::find_cgroup_memory_files("4:memory:/slice/job\n", root.c_str(), files));
    CHECK(std::string(files.usage) == root + "/memory/slice/memory.usage_in_bytes");
    CHECK(std::string(files.limit) == root + "/memory/slice/memory.limit_in_bytes");
    CHECK(std::string(files.stat) == root + "/memory/slice/memory.stat");
    CHECK(std::string(files.inactive_file_key) == "total_inactive_file");
}

TEST_CASE("a memory.stat line is read by its whole key") {
    const char* stat = "cache 100\ninactive_file_x 7\ntotal_inactive_file 4096\ninactive_file 2048\n";
    uint64_t value = 0;
    CHECK(gpuleak::stat_field(stat, "inactive_file", value));
    CHECK(value == 2048);
    CHECK(gpuleak::stat_field(stat, "total_inactive_file", value));
    CHECK(value == 4096);
    CHECK_FALSE(gpuleak::stat_field(stat, "active_file", value));
}

TEST_CASE("this process's host memory is read, unique and proportional sizes at most within their budget") {
    HostMemoryReader reader;
    reader.open();
    // Memory of our own, resident and private, so that the figures have something to count.
    std::vector<char> held(64 << 20, 1);
    HostSample sample{};
    uint64_t rss = 0;
    reader.read(sample, rss, 1'000'000'000, SampleMoment::Periodic);
    CHECK(rss >= held.size());
    REQUIRE(has(sample, HostField::Status));
    CHECK(sample.rss_anon >= held.size());
    // The test's own code and libraries: file pages, mapped and resident.
    CHECK(sample.rss_file > 0);
    REQUIRE(has(sample, HostField::Proportional));
    CHECK(sample.uss >= held.size());
    CHECK(sample.pss >= sample.uss);
    CHECK(sample.proportional_time_ns == 1'000'000'000);
    CHECK(has(sample, HostField::Available));
    CHECK(sample.available_bytes > 0);
    // A microsecond later the walk over the page tables is not due: its figures are carried over.
    reader.read(sample, rss, 1'000'001'000, SampleMoment::Periodic);
    REQUIRE(has(sample, HostField::Proportional));
    CHECK(sample.proportional_time_ns == 1'000'000'000);
    // The process's last sample reads them afresh.
    reader.read(sample, rss, 1'000'002'000, SampleMoment::Exit);
    CHECK(sample.proportional_time_ns == 1'000'002'000);
    CHECK(gpuleak::machine_memory_bytes() >= sample.available_bytes);
}

TEST_CASE("the free memory malloc keeps for reuse is read within its budget and carried over") {
    HostMemoryReader reader;
    reader.open();
    // Blocks under malloc's mmap threshold, each followed by one of the same size that is kept: freed,
    // they stay in the heap as holes it cannot give back.
    constexpr size_t kBlocks = 256;
    constexpr size_t kBlockBytes = 64 << 10;
    std::vector<void*> freed;
    std::vector<void*> kept;
    for (size_t i = 0; i < kBlocks; ++i) {
        freed.push_back(std::malloc(kBlockBytes));
        std::memset(freed.back(), 1, kBlockBytes);
        kept.push_back(std::malloc(kBlockBytes));
    }
    HostSample sample{};
    uint64_t rss = 0;
    reader.read(sample, rss, 1'000'000'000, SampleMoment::Periodic);
    CHECK_FALSE(has(sample, HostField::HeapFree)); // not read yet
    reader.read_heap(1'000'000'000);
    reader.read(sample, rss, 1'000'000'000, SampleMoment::Periodic);
    REQUIRE(has(sample, HostField::HeapFree));
    CHECK(sample.heap_time_ns == 1'000'000'000);
    const uint64_t before = sample.heap_free;
    for (void* block : freed)
        std::free(block);
    // Due again only once the time since makes the reading's cost a thousandth of it: carried over.
    reader.read_heap(1'000'000'001);
    reader.read(sample, rss, 1'000'000'001, SampleMoment::Exit);
    REQUIRE(has(sample, HostField::HeapFree));
    CHECK(sample.heap_time_ns == 1'000'000'000);
    CHECK(sample.heap_free == before);
    reader.read_heap(100'000'000'000);
    reader.read(sample, rss, 100'000'000'000, SampleMoment::Periodic);
    CHECK(sample.heap_time_ns == 100'000'000'000);
#ifndef __SANITIZE_ADDRESS__ // AddressSanitizer serves malloc itself: the C library's heap stays empty
    CHECK(sample.heap_free >= before + kBlocks * kBlockBytes);
#endif
    for (void* block : kept)
        std::free(block);
}
