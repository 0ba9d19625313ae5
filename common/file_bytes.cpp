#include "file_bytes.h"

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace gpuleak {

namespace {

// Reads from `fd` until `capacity` or the end, then closes it.
size_t read_and_close(int fd, char* buffer, size_t capacity) {
    size_t used = 0;
    while (used < capacity) {
        const ssize_t n = ::read(fd, buffer + used, capacity - used);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        used += static_cast<size_t>(n);
    }
    ::close(fd);
    return used;
}

} // namespace

size_t read_file_bytes(const char* path, char* buffer, size_t capacity) {
    const int fd = ::open(path, O_RDONLY | O_CLOEXEC);
    return fd < 0 ? 0 : read_and_close(fd, buffer, capacity);
}

size_t read_regular_file_bytes(const char* path, char* buffer, size_t capacity) {
    const int fd = ::open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    struct stat status {};
    if (::fstat(fd, &status) != 0 || !S_ISREG(status.st_mode)) {
        ::close(fd);
        return 0;
    }
    return read_and_close(fd, buffer, capacity);
}

int write_regular_file(const char* path, const char* data, size_t size, mode_t mode) {
    return write_regular_file_at(AT_FDCWD, path, data, size, mode);
}

int write_regular_file_at(int directory_fd, const char* name, const char* data, size_t size, mode_t mode) {
    // O_NONBLOCK: a FIFO without a reader fails the open (ENXIO) rather than hanging it; truncated only
    // once it is known to be a regular file.
    const int fd = ::openat(directory_fd, name,
                            O_WRONLY | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC, mode);
    if (fd < 0)
        return errno;
    struct stat status {};
    int failure = 0;
    if (::fstat(fd, &status) != 0)
        failure = errno;
    else if (!S_ISREG(status.st_mode))
        failure = kNotRegularFile;
    // Another user's file, made there to be written into (a shared directory): theirs to read after.
    else if (status.st_uid != ::geteuid())
        failure = kOtherUsersFile;
    else if (::fchmod(fd, mode) != 0 || ::ftruncate(fd, 0) != 0)
        failure = errno;
    for (size_t written = 0; failure == 0 && written < size;) {
        const ssize_t n = ::write(fd, data + written, size - written);
        if (n > 0)
            written += static_cast<size_t>(n);
        else if (n == 0 || errno != EINTR)
            failure = n == 0 ? EIO : errno;
    }
    if (::close(fd) != 0 && failure == 0)
        failure = errno;
    return failure;
}

const char* write_failure_text(int failure) {
    if (failure == kNotRegularFile)
        return "not a regular file";
    if (failure == kOtherUsersFile)
        return "owned by another user";
    // O_NOFOLLOW's refusal of a symbolic link.
    if (failure == ELOOP)
        return "a symbolic link";
    return std::strerror(failure);
}

} // namespace gpuleak
