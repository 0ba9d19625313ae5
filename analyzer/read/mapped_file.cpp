#include "read/mapped_file.h"

#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdint>
#include <cstring>
#include <fcntl.h>
#include <mutex>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/file_descriptor.h"
#include "read/trace_error.h"

namespace gpuleak::analyzer {

namespace {

// The mappings the SIGBUS handler stands in for. A slot is free while its end is 0; the handler reads
// them without a lock, as a signal handler must.
struct GuardedMapping {
    std::atomic<uintptr_t> begin{0};
    std::atomic<uintptr_t> end{0};
    std::atomic<bool> shrank{false};
};
constexpr int kGuardedMappings = 1024;
GuardedMapping g_guarded[kGuardedMappings];
uintptr_t g_page_size = 0;
struct sigaction g_previous_bus_action {};
std::once_flag g_bus_handler_installed;

void on_bus_error(int signal_number, siginfo_t* info, void* context) {
    const auto address = reinterpret_cast<uintptr_t>(info->si_addr);
    for (GuardedMapping& guarded : g_guarded) {
        if (info->si_code <= 0 || address < guarded.begin.load(std::memory_order_acquire) ||
            address >= guarded.end.load(std::memory_order_acquire))
            continue;
        const uintptr_t page = address & ~(g_page_size - 1);
        // NOLINTNEXTLINE(performance-no-int-to-ptr): the faulting address, as the kernel gave it.
        if (::mmap(reinterpret_cast<void*>(page), g_page_size, PROT_READ,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0) == MAP_FAILED)
            break;
        guarded.shrank.store(true, std::memory_order_release);
        return;
    }
    // Not a read of a mapped trace: what the process did with SIGBUS before. A fault happens again once
    // this returns, now under that disposition; a signal sent is sent again.
    if ((g_previous_bus_action.sa_flags & SA_SIGINFO) != 0 && g_previous_bus_action.sa_sigaction != nullptr) {
        g_previous_bus_action.sa_sigaction(signal_number, info, context);
        return;
    }
    if (g_previous_bus_action.sa_handler != SIG_DFL && g_previous_bus_action.sa_handler != SIG_IGN) {
        g_previous_bus_action.sa_handler(signal_number);
        return;
    }
    ::sigaction(SIGBUS, &g_previous_bus_action, nullptr);
    if (info->si_code <= 0)
        ::raise(signal_number);
}

void install_bus_handler() {
    g_page_size = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
    struct sigaction action {};
    action.sa_sigaction = on_bus_error;
    action.sa_flags = SA_SIGINFO | SA_RESTART;
    sigemptyset(&action.sa_mask);
    ::sigaction(SIGBUS, &action, &g_previous_bus_action);
}

int guard(const std::byte* data, std::size_t size) {
    std::call_once(g_bus_handler_installed, install_bus_handler);
    for (int slot = 0; slot < kGuardedMappings; ++slot) {
        uintptr_t free = 0;
        GuardedMapping& guarded = g_guarded[slot];
        // Claimed by its begin; made visible to the handler by its end.
        if (guarded.end.load(std::memory_order_acquire) != 0 ||
            !guarded.begin.compare_exchange_strong(free, reinterpret_cast<uintptr_t>(data)))
            continue;
        guarded.shrank.store(false, std::memory_order_relaxed);
        guarded.end.store(reinterpret_cast<uintptr_t>(data) + size, std::memory_order_release);
        return slot;
    }
    return -1;
}

void unguard(int slot) {
    if (slot < 0)
        return;
    g_guarded[slot].end.store(0, std::memory_order_release);
    g_guarded[slot].begin.store(0, std::memory_order_release);
}

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
    guard_ = guard(data_, size_);
    // See prefetch(). Advice only: if it fails, the kernel reads around each fault.
    ::madvise(mapping, size_, MADV_RANDOM);
}

bool MappedFile::shrank() const {
    return guard_ >= 0 && g_guarded[guard_].shrank.load(std::memory_order_acquire);
}

void MappedFile::release(std::span<const std::byte> part) const {
    const auto page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
    const auto begin = (reinterpret_cast<uintptr_t>(part.data()) + page - 1) & ~(page - 1);
    const auto end = (reinterpret_cast<uintptr_t>(part.data()) + part.size()) & ~(page - 1);
    // Advice only: if it fails, the pages merely stay resident.
    if (begin < end)
        ::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_DONTNEED);
}

void MappedFile::prefetch(std::span<const std::byte> part) const {
    if (part.empty())
        return;
    const auto page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
    // From the start of its first page, which lies in the mapping: madvise takes whole pages.
    const size_t before = reinterpret_cast<uintptr_t>(part.data()) & (page - 1);
    // Advice only: if it fails, each page is read at its first use.
    ::madvise(const_cast<std::byte*>(part.data() - before), part.size() + before, MADV_WILLNEED);
}

MappedFile::~MappedFile() {
    unguard(guard_);
    ::munmap(const_cast<std::byte*>(data_), size_);
}

} // namespace gpuleak::analyzer
