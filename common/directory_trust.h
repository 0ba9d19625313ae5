// Whether files may be made in a directory without another user reading, replacing or removing them:
// the traces, the reports and the kernel's state that gpuleak and its launcher write.
#pragma once

namespace gpuleak {

// Null when the directory open at `directory_fd` is trusted: the user's own (or root's) and writable by
// no one else (a group write bit counts for nothing where the group is the user's private one, as a
// umask of 002 leaves it), or a shared directory with the sticky bit (such as /tmp) owned by the user or
// by root, where no one else can remove or rename what the user makes; for root, also another user's
// that no one else can write to. Else a few words why not ("owned by another user", "writable by others
// than its owner", "writable by a group of other users", "not a directory", or strerror's when it
// cannot be examined).
const char* directory_distrust(int directory_fd);

} // namespace gpuleak
