#include "mapped_file.h"

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "trace_error.h"

namespace gpuleak::analyzer {

namespace {

class FileDescriptor {
  public:
    explicit FileDescriptor(int fd) : fd_(fd) {}
    ~FileDescriptor() {
        if (fd_ >= 0)
            ::close(fd_);
    }
    FileDescriptor(const FileDescriptor&) = delete;
    FileDescriptor& operator=(const FileDescriptor&) = delete;
    [[nodiscard]] int get() const { return fd_; }

  private:
    int fd_;
};

} // namespace

MappedFile::MappedFile(const std::string& path) {
    // O_NONBLOCK: opening a FIFO by mistake must not hang the analyzer; the regular-file check follows.
    FileDescriptor fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK));
    if (fd.get() < 0)
        throw TraceError(path, std::strerror(errno));
    struct stat status {};
    if (::fstat(fd.get(), &status) != 0)
        throw TraceError(path, std::strerror(errno));
    if (S_ISDIR(status.st_mode))
        throw TraceError(path, "is a directory");
    if (!S_ISREG(status.st_mode))
        throw TraceError(path, "not a regular file");
    if (status.st_size == 0)
        throw TraceError(path, "empty file");
    size_ = static_cast<std::size_t>(status.st_size);
    // MAP_PRIVATE: the analyzer never writes, and a private mapping cannot change the trace by accident.
    void* mapping = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd.get(), 0);
    if (mapping == MAP_FAILED)
        throw TraceError(path, std::string("cannot map: ") + std::strerror(errno));
    data_ = static_cast<const std::byte*>(mapping);
}

void MappedFile::release(std::span<const std::byte> part) const {
    const auto page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
    const auto begin = (reinterpret_cast<uintptr_t>(part.data()) + page - 1) & ~(page - 1);
    const auto end = (reinterpret_cast<uintptr_t>(part.data()) + part.size()) & ~(page - 1);
    // Advice only: if it fails, the pages merely stay resident.
    if (begin < end)
        ::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_DONTNEED);
}

MappedFile::~MappedFile() {
    ::munmap(const_cast<std::byte*>(data_), size_);
}

} // namespace gpuleak::analyzer
