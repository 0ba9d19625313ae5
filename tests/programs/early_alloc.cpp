// A library whose constructor allocates device memory, as a framework's static initialiser might:
// it runs before the program's main and, loaded as the program's dependency, ahead of other
// constructors, possibly before libgpuleak's own.
#include "early_alloc.h"

#include "allocation_log.h"

namespace {

constexpr size_t kEarlySize = 12345;

void* g_early_allocation = nullptr;

__attribute__((constructor(101))) void allocate_early() {
    if (cudaMalloc(&g_early_allocation, kEarlySize) != 0)
        g_early_allocation = nullptr;
}

} // namespace

void* early_allocation() {
    return g_early_allocation;
}

size_t early_allocation_size() {
    return kEarlySize;
}
