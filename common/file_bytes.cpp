#include "common/file_bytes.h"

#include <cerrno>
#include <climits>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <sys/random.h>
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
    return read_regular_file_bytes_at(AT_FDCWD, path, buffer, capacity);
}

size_t read_regular_file_bytes_at(int directory_fd, const char* name, char* buffer, size_t capacity) {
    const int fd = ::openat(directory_fd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    struct stat status {};
    if (::fstat(fd, &status) != 0 || !S_ISREG(status.st_mode)) {
        ::close(fd);
        return 0;
    }
    return read_and_close(fd, buffer, capacity);
}

const char* name_in_directory(const char* path) {
    const char* slash = std::strrchr(path, '/');
    return slash == nullptr ? path : slash + 1;
}

int open_directory_of(const char* path, char* directory, size_t capacity) {
    const char* slash = std::strrchr(path, '/');
    const int length = slash == nullptr
                           ? std::snprintf(directory, capacity, ".")
                           : std::snprintf(directory, capacity, "%.*s",
                                           static_cast<int>(slash == path ? 1 : slash - path), path);
    if (length < 0 || static_cast<size_t>(length) >= capacity) {
        errno = ENAMETOOLONG;
        return -1;
    }
    return ::open(directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
}

namespace {

// Makes a new file beside `name` (in the same directory, so that it can be renamed over it) under a
// name no one had: never one that was there, so never a link or a FIFO someone made. Its descriptor, or
// -1 with errno; its name in `temporary`.
int create_beside(int directory_fd, const char* name, char (&temporary)[NAME_MAX + 1], mode_t mode) {
    for (int attempt = 0; attempt < 100; ++attempt) {
        uint32_t suffix = 0;
        if (::getrandom(&suffix, sizeof suffix, GRND_NONBLOCK) != sizeof suffix)
            suffix = static_cast<uint32_t>(::getpid()) * 2654435761U + static_cast<uint32_t>(attempt);
        const int length = std::snprintf(temporary, sizeof temporary, ".%s.%08x", name, suffix);
        if (length < 0 || static_cast<size_t>(length) >= sizeof temporary) {
            errno = ENAMETOOLONG;
            return -1;
        }
        const int fd = ::openat(directory_fd, temporary,
                                O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_NOCTTY | O_CLOEXEC, mode);
        if (fd >= 0 || errno != EEXIST)
            return fd;
    }
    errno = EEXIST;
    return -1;
}

int write_all(int fd, const char* data, size_t size) {
    for (size_t written = 0; written < size;) {
        const ssize_t n = ::write(fd, data + written, size - written);
        if (n > 0)
            written += static_cast<size_t>(n);
        else if (n == 0 || errno != EINTR)
            return n == 0 ? EIO : errno;
    }
    return 0;
}

} // namespace

int write_regular_file(const char* path, const char* data, size_t size, mode_t mode) {
    ReplacingFile file(path, mode);
    file.write(data, size);
    return file.commit();
}

int write_regular_file_at(int directory_fd, const char* name, const char* data, size_t size, mode_t mode) {
    ReplacingFile file(directory_fd, name, mode);
    file.write(data, size);
    return file.commit();
}

ReplacingFile::ReplacingFile(const char* path, mode_t mode) : mode_(mode) {
    // Its directory held open: the new file is made, renamed and if need be removed in that one.
    char directory[PATH_MAX];
    directory_fd_ = open_directory_of(path, directory, sizeof directory);
    if (directory_fd_ < 0)
        failure_ = errno;
    own_directory_ = directory_fd_ >= 0;
    if (failure_ == 0 &&
        std::snprintf(name_, sizeof name_, "%s", name_in_directory(path)) >= static_cast<int>(sizeof name_))
        failure_ = ENAMETOOLONG;
}

ReplacingFile::ReplacingFile(int directory_fd, const char* name, mode_t mode)
    : directory_fd_(directory_fd), mode_(mode) {
    if (std::snprintf(name_, sizeof name_, "%s", name) >= static_cast<int>(sizeof name_))
        failure_ = ENAMETOOLONG;
}

ReplacingFile::~ReplacingFile() {
    if (fd_ >= 0) {
        ::close(fd_);
        ::unlinkat(directory_fd_, temporary_, 0);
    }
    if (own_directory_)
        ::close(directory_fd_);
}

int ReplacingFile::start() {
    // What is there must be the user's own regular file: anything else was planted (another user's file,
    // made there to be written into; a link; a FIFO), and is refused rather than replaced.
    struct stat existing {};
    if (::fstatat(directory_fd_, name_, &existing, AT_SYMLINK_NOFOLLOW) == 0) {
        if (S_ISLNK(existing.st_mode))
            return ELOOP;
        if (!S_ISREG(existing.st_mode))
            return kNotRegularFile;
        if (existing.st_uid != ::geteuid())
            return kOtherUsersFile;
    } else if (errno != ENOENT) {
        return errno;
    }
    // Written whole under a new name, then renamed over the old: a reader, or a run cut short, finds the
    // old file or the new one, never a part of either; and a link put there meanwhile is replaced, not
    // followed.
    fd_ = create_beside(directory_fd_, name_, temporary_, mode_);
    if (fd_ < 0)
        return errno;
    return ::fchmod(fd_, mode_) != 0 ? errno : 0;
}

int ReplacingFile::write(const char* data, size_t size) {
    if (!started_) {
        started_ = true;
        if (failure_ == 0)
            failure_ = start();
    }
    if (failure_ == 0)
        failure_ = write_all(fd_, data, size);
    return failure_;
}

int ReplacingFile::commit() {
    if (failure_ != 0 || fd_ < 0)
        return failure_;
    failure_ = ::close(fd_) != 0 ? errno : 0;
    fd_ = -1;
    if (failure_ == 0 && ::renameat(directory_fd_, temporary_, directory_fd_, name_) != 0)
        failure_ = errno;
    if (failure_ != 0)
        ::unlinkat(directory_fd_, temporary_, 0);
    return failure_;
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
