#include "host_backing.h"

#include <cstdlib>
#include <sys/mman.h>

namespace gpuleak::sim {
namespace {

constexpr std::size_t kAlignment = 512;
// Large blocks are mapped without reserving swap, so that a simulated multi-GiB tensor costs nothing until
// the program touches it.
constexpr std::size_t kMapThreshold = std::size_t{1} << 20;

} // namespace

void* allocate_backing(std::size_t size) {
    if (size >= kMapThreshold) {
        void* memory =
            mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        return memory == MAP_FAILED ? nullptr : memory;
    }
    return std::aligned_alloc(kAlignment, (size + kAlignment - 1) / kAlignment * kAlignment);
}

void release_backing(void* memory, std::size_t size) {
    if (size >= kMapThreshold) {
        munmap(memory, size);
    } else {
        std::free(memory);
    }
}

} // namespace gpuleak::sim
