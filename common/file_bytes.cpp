#include "file_bytes.h"

#include <cerrno>
#include <fcntl.h>
#include <unistd.h>

namespace gpuleak {

size_t read_file_bytes(const char* path, char* buffer, size_t capacity) {
    const int fd = ::open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
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

} // namespace gpuleak
