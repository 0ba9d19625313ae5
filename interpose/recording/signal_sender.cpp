#include "recording/signal_sender.h"

#include <fcntl.h>
#include <unistd.h>

namespace gpuleak {

namespace {

// "/proc/PID/comm" into `path` without snprintf, which is not async-signal-safe.
void comm_path(pid_t pid, char (&path)[32]) {
    constexpr char kPrefix[] = "/proc/";
    constexpr char kSuffix[] = "/comm";
    char digits[16];
    size_t digit_count = 0;
    for (auto value = static_cast<unsigned long>(pid); digit_count == 0 || value != 0; value /= 10)
        digits[digit_count++] = static_cast<char>('0' + value % 10);
    size_t length = 0;
    for (const char c : kPrefix)
        if (c != '\0')
            path[length++] = c;
    while (digit_count > 0)
        path[length++] = digits[--digit_count];
    for (const char c : kSuffix)
        path[length++] = c; // the suffix's NUL ends the path
}

void read_comm(pid_t pid, char (&name)[sizeof format::EndSender::name]) {
    char path[32];
    comm_path(pid, path);
    const int fd = ::open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return;
    const ssize_t length = ::read(fd, name, sizeof name - 1);
    ::close(fd);
    // The kernel ends the name with a newline.
    size_t kept = length > 0 ? static_cast<size_t>(length) : 0;
    while (kept > 0 && (name[kept - 1] == '\n' || name[kept - 1] == '\0'))
        --kept;
    name[kept] = '\0';
}

} // namespace

format::EndSender signal_sender(const siginfo_t* info) {
    format::EndSender sender{};
    sender.written_by = static_cast<uint32_t>(format::EndWriter::Process);
    if (info == nullptr)
        return sender;
    sender.signal_code = info->si_code;
    // SI_KERNEL is positive as the codes of faults are.
    if (info->si_code > 0) {
        sender.kind = static_cast<uint32_t>(format::SenderKind::Kernel);
        return sender;
    }
    if (info->si_code != SI_USER && info->si_code != SI_QUEUE && info->si_code != SI_TKILL)
        return sender;
    sender.pid = info->si_pid;
    sender.uid = info->si_uid;
    if (info->si_pid == ::getpid()) {
        sender.kind = static_cast<uint32_t>(format::SenderKind::Itself);
        return sender;
    }
    sender.kind = static_cast<uint32_t>(format::SenderKind::Process);
    read_comm(info->si_pid, sender.name);
    return sender;
}

} // namespace gpuleak
