#include "directory_trust.h"

#include <cerrno>
#include <cstring>
#include <sys/stat.h>
#include <unistd.h>

namespace gpuleak {

const char* directory_distrust(int directory_fd) {
    struct stat status {};
    if (::fstat(directory_fd, &status) != 0)
        return std::strerror(errno);
    if (!S_ISDIR(status.st_mode))
        return "not a directory";
    const uid_t user = ::geteuid();
    const bool owner_trusted = status.st_uid == user || status.st_uid == 0;
    if ((status.st_mode & S_ISVTX) != 0 && owner_trusted)
        return nullptr;
    // Root may write where a user's files are (a container's root in a directory mounted from the host):
    // that user could do no more than they can to their own files.
    if (!owner_trusted && user != 0)
        return "owned by another user";
    if ((status.st_mode & (S_IWGRP | S_IWOTH)) != 0)
        return "writable by others than its owner";
    return nullptr;
}

} // namespace gpuleak
