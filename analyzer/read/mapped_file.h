// A read-only view of a whole file. The trace is mapped rather than read so that a large trace costs
// no copy and so that a trace still being written can be read while its process runs.
//
// A file that another program cuts shorter while it is mapped (ftruncate, a copy over it) would kill
// the reader with SIGBUS at the first read past its new end. A SIGBUS handler, installed once, puts a
// page of zeros in place of each page gone, as if those bytes had never been written, and notes it
// (shrank()): the reader reads on and the caller says so. A SIGBUS of anything else is handled as it
// was before.
#pragma once

#include <cstddef>
#include <span>
#include <string>

namespace gpuleak::analyzer {

class MappedFile {
  public:
    // Throws TraceError for a file that is missing, unreadable, a directory, not a regular file, or empty.
    explicit MappedFile(const std::string& path);
    ~MappedFile();
    MappedFile(const MappedFile&) = delete;
    MappedFile& operator=(const MappedFile&) = delete;

    [[nodiscard]] std::span<const std::byte> bytes() const { return {data_, size_}; }

    // Drops the pages wholly inside `part` (a piece of bytes()) from this process's resident set: a
    // reader that streams through a trace larger than memory calls it on what it has read. The contents
    // stay; touching them again reads them back from the file (or the page cache).
    void release(std::span<const std::byte> part) const;

    // Reads `part` (a piece of bytes()) into memory ahead of its use. The file is mapped for reads here
    // and there, a fault reading its own page alone: a trace's regions are sized by GPULEAK_MAX_MB, not
    // by what they hold, and reading around each fault took tens of MiB of a trace of a short script
    // (a thousand ranks' traces, tens of GiB). The reader names the parts in use.
    void prefetch(std::span<const std::byte> part) const;

    // Some of it was read after the file was cut shorter: those bytes read as zeros.
    [[nodiscard]] bool shrank() const;

  private:
    const std::byte* data_ = nullptr;
    std::size_t size_ = 0;
    int guard_ = -1; // its slot among the guarded mappings; -1: unguarded (every slot taken)
};

} // namespace gpuleak::analyzer
