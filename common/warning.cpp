#include "common/warning.h"

#include <atomic>
#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <span>
#include <string_view>
#include <unistd.h>

#include "common/printable.h"

namespace gpuleak {

namespace {
constinit std::atomic<int> g_warning_fd{STDERR_FILENO};
} // namespace

int send_warnings_to(int fd) {
    return g_warning_fd.exchange(fd, std::memory_order_acq_rel);
}

void warn(const char* format, ...) {
    char body[1024];
    va_list args;
    va_start(args, format);
    const int formatted = std::vsnprintf(body, sizeof body, format, args);
    va_end(args);
    if (formatted < 0)
        return;
    // What it names (the program's command line, a trace's path) stays on this one line and drives no
    // terminal.
    constexpr std::string_view kPrefix = "gpuleak: ";
    char line[kPrefix.size() + 4 * sizeof body + 1];
    std::memcpy(line, kPrefix.data(), kPrefix.size());
    size_t length = kPrefix.size() + printable_into(std::string_view(body, std::strlen(body)),
                                                    std::span<char>(line + kPrefix.size(), 4 * sizeof body));
    line[length++] = '\n';
    const int fd = g_warning_fd.load(std::memory_order_acquire);
    if (fd < 0)
        return;
    for (size_t written = 0; written < length;) {
        ssize_t n = ::write(fd, line + written, length - written);
        if (n <= 0 && errno != EINTR)
            return;
        if (n > 0)
            written += static_cast<size_t>(n);
    }
}

} // namespace gpuleak
