#include "host_backing.h"

#include <algorithm>
#include <cstdlib>
#include <sys/mman.h>
#include <unistd.h>

namespace gpuleak::sim {
namespace {

constexpr std::size_t kAlignment = 512;
// Large blocks are mapped without reserving swap, so that a simulated multi-GiB tensor costs nothing until
// the program touches it.
constexpr std::size_t kMapThreshold = std::size_t{1} << 20;
// Read once at load: resident_backing_bytes may run in a signal handler.
const auto kPage = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));

} // namespace

void* allocate_backing(std::size_t size) {
    if (size >= kMapThreshold) {
        void* memory =
            mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        return memory == MAP_FAILED ? nullptr : memory;
    }
    return std::aligned_alloc(kAlignment, (size + kAlignment - 1) / kAlignment * kAlignment);
}

std::size_t resident_backing_bytes(const void* memory, std::size_t size) {
    if (size < kMapThreshold) {
        return size;
    }
    const std::size_t page = kPage;
    // In chunks, so that no memory is allocated to read them, and little stack: it may run in a signal
    // handler on a small alternate stack.
    constexpr std::size_t kChunkPages = 256;
    unsigned char resident[kChunkPages];
    std::size_t bytes = 0;
    const auto* start = static_cast<const unsigned char*>(memory);
    for (std::size_t offset = 0; offset < size; offset += kChunkPages * page) {
        const std::size_t length = std::min(size - offset, kChunkPages * page);
        if (mincore(const_cast<unsigned char*>(start + offset), length, resident) != 0) {
            continue;
        }
        for (std::size_t i = 0; i < (length + page - 1) / page; ++i) {
            if ((resident[i] & 1) != 0) {
                bytes += std::min(page, length - i * page);
            }
        }
    }
    return bytes;
}

void release_backing(void* memory, std::size_t size) {
    if (size >= kMapThreshold) {
        munmap(memory, size);
    } else {
        std::free(memory);
    }
}

} // namespace gpuleak::sim
