// How a test program tells its test what it did. Every line goes to the log file with one write(2) on
// an O_APPEND descriptor: it is in the page cache when the call returns (a SIGKILL loses none), and
// lines of different threads and processes never interleave.
//
// Lines (addresses in hex, sizes in decimal):
//   alloc <pid> <tid> <address> <size>     a cudaMalloc that succeeded
//   free <pid> <tid> <address>             a cudaFree that succeeded
//   begin <pid> <tid> alloc <size>         written before a call, by programs that may be killed in it
//   begin <pid> <tid> free <address>
// plus lines of the program's own, which start with another word.
#pragma once

#include <cstdarg>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fcntl.h>
#include <unistd.h>

extern "C" {
int cudaMalloc(void** pointer, size_t size);
int cudaFree(void* pointer);
}

class AllocationLog {
  public:
    explicit AllocationLog(const char* path)
        : fd_(::open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600)) {
        if (fd_ < 0) {
            std::perror(path);
            std::exit(2);
        }
    }
    AllocationLog(const AllocationLog&) = delete;
    AllocationLog& operator=(const AllocationLog&) = delete;
    ~AllocationLog() { ::close(fd_); }

    __attribute__((format(printf, 2, 3))) void line(const char* format, ...) const {
        char text[256];
        va_list args;
        va_start(args, format);
        int length = std::vsnprintf(text, sizeof text - 1, format, args);
        va_end(args);
        if (length < 0 || static_cast<size_t>(length) >= sizeof text - 1)
            fail("log line too long");
        text[length++] = '\n';
        if (::write(fd_, text, static_cast<size_t>(length)) != length)
            fail("cannot write the log");
    }

    // cudaMalloc, logged once it returned; exits on failure (the tests expect every call to succeed).
    void* allocate(size_t size) const {
        void* pointer = nullptr;
        if (cudaMalloc(&pointer, size) != 0)
            fail("cudaMalloc failed");
        line("alloc %d %d %#llx %zu", ::getpid(), ::gettid(), address(pointer), size);
        return pointer;
    }

    void release(void* pointer) const {
        if (cudaFree(pointer) != 0)
            fail("cudaFree failed");
        line("free %d %d %#llx", ::getpid(), ::gettid(), address(pointer));
    }

    // The same, with a "begin" line before the call: what a test needs to tell an operation that was in
    // flight when the process was killed from one that completed.
    void* allocate_announced(size_t size) const {
        line("begin %d %d alloc %zu", ::getpid(), ::gettid(), size);
        return allocate(size);
    }

    void release_announced(void* pointer) const {
        line("begin %d %d free %#llx", ::getpid(), ::gettid(), address(pointer));
        release(pointer);
    }

    [[noreturn]] static void fail(const char* what) {
        std::fprintf(stderr, "%s\n", what);
        std::_Exit(2);
    }

    static unsigned long long address(const void* pointer) {
        return static_cast<unsigned long long>(reinterpret_cast<uintptr_t>(pointer));
    }

  private:
    int fd_;
};
