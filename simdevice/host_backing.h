// Host memory standing in for device and pinned memory.
#pragma once

#include <cstddef>

namespace gpuleak::sim {

// nullptr when the host has no memory (or address space) left. Blocks are 512-byte aligned, the
// alignment cudaMalloc guarantees.
void* allocate_backing(std::size_t size);
// `size` as given to allocate_backing.
void release_backing(void* memory, std::size_t size);
// Of a backing of `size` bytes, those whose pages are resident: a small backing's from the heap all.
std::size_t resident_backing_bytes(const void* memory, std::size_t size);

} // namespace gpuleak::sim
