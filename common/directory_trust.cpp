#include "common/directory_trust.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string_view>
#include <sys/stat.h>
#include <unistd.h>

#include "common/file_bytes.h"

namespace gpuleak {

namespace {

// The fields of the line of a colon-separated file (/etc/passwd, /etc/group) whose `key_field`-th field
// is `key`, as `fields` (at most `count` of them); false when no line has it among the bytes read.
bool find_entry(std::string_view file, size_t key_field, std::string_view key, std::string_view* fields,
                size_t count) {
    while (!file.empty()) {
        const size_t end = file.find('\n');
        std::string_view line = file.substr(0, end);
        file.remove_prefix(end == std::string_view::npos ? file.size() : end + 1);
        size_t field = 0;
        while (field < count) {
            const size_t colon = line.find(':');
            fields[field++] = line.substr(0, colon);
            if (colon == std::string_view::npos)
                break;
            line.remove_prefix(colon + 1);
        }
        if (field > key_field && fields[key_field] == key)
            return true;
    }
    return false;
}

// Whether group `gid`, the user's own, has no member but the user: a user private group, which a umask
// of 002 (Fedora's, RHEL's) makes every new directory writable by. Read from /etc/passwd and /etc/group
// themselves, not through NSS, which the library must not enter from inside a program's call; a group
// that only NSS knows is not taken for private.
bool private_group(gid_t gid, uid_t user) {
    char bytes[32 << 10];
    char number[24];
    std::string_view fields[4];
    const size_t passwd = read_file_bytes("/etc/passwd", bytes, sizeof bytes);
    const int uid_length = std::snprintf(number, sizeof number, "%u", static_cast<unsigned>(user));
    if (!find_entry({bytes, passwd}, 2, {number, static_cast<size_t>(uid_length)}, fields, 3))
        return false;
    char name[256];
    const size_t name_length = fields[0].size() < sizeof name ? fields[0].size() : 0;
    std::memcpy(name, fields[0].data(), name_length);
    const size_t group = read_file_bytes("/etc/group", bytes, sizeof bytes);
    const int gid_length = std::snprintf(number, sizeof number, "%u", static_cast<unsigned>(gid));
    if (name_length == 0 ||
        !find_entry({bytes, group}, 2, {number, static_cast<size_t>(gid_length)}, fields, 4))
        return false;
    for (std::string_view members = fields[3]; !members.empty();) {
        const size_t comma = members.find(',');
        if (members.substr(0, comma) != std::string_view(name, name_length))
            return false;
        members.remove_prefix(comma == std::string_view::npos ? members.size() : comma + 1);
    }
    return true;
}

} // namespace

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
    if ((status.st_mode & S_IWOTH) != 0)
        return "writable by others than its owner";
    if ((status.st_mode & S_IWGRP) != 0 &&
        !(status.st_gid == ::getegid() && private_group(status.st_gid, user)))
        return "writable by a group of other users";
    return nullptr;
}

} // namespace gpuleak
