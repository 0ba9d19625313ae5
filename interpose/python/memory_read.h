// Reading another component's structs at addresses and offsets known only at run time (the Python
// interpreter's frames and objects): the addresses come as integers, read from those structs.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <sys/uio.h>
#include <unistd.h>

namespace gpuleak {

// Copies `size` bytes at `address`.
inline void copy_at(void* destination, uintptr_t address, size_t size) {
    // NOLINTNEXTLINE(performance-no-int-to-ptr): the address was read from the other component's memory.
    std::memcpy(destination, reinterpret_cast<const void*>(address), size);
}

// The T stored at `address`: a plain load of an object whose type this program does not declare.
template <class T> T read_at(uintptr_t address) {
    T value;
    copy_at(&value, address, sizeof value);
    return value;
}

// Copies `size` bytes at `address` into `destination` through the kernel, which fails (false) where
// a load would fault: memory another thread may free and unmap meanwhile.
inline bool copy_checked(void* destination, uintptr_t address, size_t size) {
    iovec local{destination, size};
    // NOLINTNEXTLINE(performance-no-int-to-ptr): the address was read from the other component's memory.
    iovec remote{reinterpret_cast<void*>(address), size};
    return process_vm_readv(getpid(), &local, 1, &remote, 1, 0) == static_cast<ssize_t>(size);
}

// The T stored at `address`, read as copy_checked reads: false where a load would fault.
template <class T> bool read_checked(uintptr_t address, T& value) {
    return copy_checked(&value, address, sizeof value);
}

// The pointer-sized word at `address`, which another thread stores atomically, read with acquire order.
inline uintptr_t acquire_word_at(uintptr_t address) {
    // NOLINTNEXTLINE(performance-no-int-to-ptr): the address was read from the other component's memory.
    return __atomic_load_n(reinterpret_cast<const uintptr_t*>(address), __ATOMIC_ACQUIRE);
}

} // namespace gpuleak
