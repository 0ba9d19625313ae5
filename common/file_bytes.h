// A file's bytes into a buffer of the caller's (/proc and cgroup files, read with no heap memory), and
// bytes into a file that must be a regular one (reports, kernel specs).
#pragma once

#include <climits>
#include <cstddef>
#include <sys/types.h>

namespace gpuleak {

// Reads up to `capacity` bytes of the file at `path` into `buffer`, on through reads a signal
// interrupts. The bytes read: 0 also when it cannot be opened.
size_t read_file_bytes(const char* path, char* buffer, size_t capacity);

// The same for a file another user may have put in its place: only a regular file is read, never one
// through a symbolic link at `path`, and a FIFO never blocks it. 0 for anything else.
size_t read_regular_file_bytes(const char* path, char* buffer, size_t capacity);
// The same for the file `name` in the directory open at `directory_fd`.
size_t read_regular_file_bytes_at(int directory_fd, const char* name, char* buffer, size_t capacity);

// The part of `path` after its last slash: its name in its directory.
const char* name_in_directory(const char* path);
// The directory a file named `path` is in, opened: what is made there is made relative to it, so that
// the directory opened (and checked) is the directory written, whatever happens to its path meanwhile.
// -1 with errno where it cannot be opened; `directory` receives its name.
int open_directory_of(const char* path, char* directory, size_t capacity);

// What write_regular_file returns when `path` names something other than a regular file, or one that
// another user owns.
inline constexpr int kNotRegularFile = -1;
inline constexpr int kOtherUsersFile = -2;

// Writes the `size` bytes at `data` as the whole content of the regular file at `path`, which gets
// `mode` whether it existed or not: written under a new name beside it, then renamed over it, so that
// the file is the old one or the whole new one at any moment. Where something else is at `path` (a
// symbolic link, a FIFO, a device, another user's file: what another user planted there), it is
// refused, neither used nor replaced, and nothing blocks. 0, kNotRegularFile, kOtherUsersFile, or the
// errno of the call that failed (ELOOP for a link).
int write_regular_file(const char* path, const char* data, size_t size, mode_t mode);
// The same for the file `name` (no slash in it) in the directory open at `directory_fd`: what it writes
// lands in that directory, whatever happens to the directory's path meanwhile.
int write_regular_file_at(int directory_fd, const char* name, const char* data, size_t size, mode_t mode);

// A regular file written a part at a time, then put in place of the one at its name as write_regular_file
// does (refusing what it refuses): for output made as it goes, a report of a thousand processes, which is
// not held whole. Nothing is made before the first write(), so that a writer with nothing to write leaves
// no file. Until commit() the file at the name is the old one; a replacement not committed (a write failed,
// the writer gave up) is removed when this is destroyed.
class ReplacingFile {
  public:
    ReplacingFile(const char* path, mode_t mode);
    // `name` (no slash in it) in the directory open at `directory_fd`, which must stay open until this
    // is destroyed.
    ReplacingFile(int directory_fd, const char* name, mode_t mode);
    ~ReplacingFile();
    ReplacingFile(const ReplacingFile&) = delete;
    ReplacingFile& operator=(const ReplacingFile&) = delete;

    // Appends `size` bytes, the first call making the new file. 0, or the first failure (what
    // write_regular_file would return), after which nothing more is written.
    int write(const char* data, size_t size);
    // Whether write() was called: there is a new file to put in place, or a failure to say.
    [[nodiscard]] bool started() const { return started_; }
    // Puts the new file in place of the old: 0, or the first failure.
    int commit();

  private:
    int start();

    int directory_fd_ = -1;
    bool own_directory_ = false;
    mode_t mode_;
    int fd_ = -1;
    bool started_ = false;
    int failure_ = 0;
    char name_[NAME_MAX + 1] = {};
    char temporary_[NAME_MAX + 1] = {};
};

// A few words for what write_regular_file returned: "not a regular file", strerror's.
const char* write_failure_text(int failure);

} // namespace gpuleak
