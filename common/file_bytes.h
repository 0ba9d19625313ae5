// A file's bytes into a buffer of the caller's: /proc and cgroup files, read with no heap memory.
#pragma once

#include <cstddef>

namespace gpuleak {

// Reads up to `capacity` bytes of the file at `path` into `buffer`, on through reads a signal
// interrupts. The bytes read: 0 also when it cannot be opened.
size_t read_file_bytes(const char* path, char* buffer, size_t capacity);

} // namespace gpuleak
