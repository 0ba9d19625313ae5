#include "launcher/signal_forwarding.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fmt/format.h>
#include <sys/wait.h>
#include <system_error>
#include <unistd.h>

#include "common/file_bytes.h"

namespace gpuleak::launcher {

namespace {

constexpr int kForwardable[] = {SIGHUP, SIGINT, SIGQUIT, SIGTERM, SIGUSR1, SIGUSR2};

// What the handler of exit_on_signal writes: formatted beforehand, as a handler may only write(2).
char g_interrupted_message[2048];
size_t g_interrupted_length = 0;
int g_interrupted_status = 0;

void on_signal_after_command(int) {
    [[maybe_unused]] const ssize_t written =
        ::write(STDERR_FILENO, g_interrupted_message, g_interrupted_length);
    ::_exit(g_interrupted_status);
}

bool sent_by_a_process(const siginfo_t& info) {
    return info.si_code == SI_USER || info.si_code == SI_QUEUE || info.si_code == SI_TKILL;
}

// The sender's name as it sent the signal: it may be gone by the time the command has ended.
std::string command_name(pid_t pid) {
    char name[64];
    const size_t size = read_file_bytes(fmt::format("/proc/{}/comm", pid).c_str(), name, sizeof name);
    std::string_view text(name, size);
    while (!text.empty() && text.back() == '\n')
        text.remove_suffix(1);
    return std::string(text);
}

} // namespace

bool should_forward(const siginfo_t& info, pid_t child, bool child_in_our_process_group) {
    // The terminal sends Ctrl-C, Ctrl-\ and a hang-up to its whole foreground process group: a child still
    // in ours has the signal already, and a second one would interrupt its handling of the first
    // (Python's KeyboardInterrupt cleanup).
    if (!sent_by_a_process(info))
        return !child_in_our_process_group;
    // The command signalled its process group, or the launcher: it has the signal, or meant the launcher.
    return info.si_pid != child;
}

Supervision::Supervision(bool group_interrupts) : group_interrupts_(group_interrupts) {
    sigemptyset(&waited_);
    for (int signal_number : kForwardable) {
        struct sigaction current {};
        if (::sigaction(signal_number, nullptr, &current) == 0 && current.sa_handler != SIG_IGN) {
            forwarded_.push_back(signal_number);
            sigaddset(&waited_, signal_number);
        }
    }
    // A SIGCHLD ignored by the launcher's parent would have the kernel reap the child unseen.
    struct sigaction default_action {};
    default_action.sa_handler = SIG_DFL;
    ::sigaction(SIGCHLD, &default_action, &original_sigchld_);
    sigaddset(&waited_, SIGCHLD);
    ::sigprocmask(SIG_BLOCK, &waited_, &original_mask_);
}

Supervision::~Supervision() {
    ::sigprocmask(SIG_SETMASK, &original_mask_, nullptr);
    ::sigaction(SIGCHLD, &original_sigchld_, nullptr);
}

void Supervision::restore_in_child() const noexcept {
    ::sigaction(SIGCHLD, &original_sigchld_, nullptr);
    ::sigprocmask(SIG_SETMASK, &original_mask_, nullptr);
}

int Supervision::wait_forwarding(pid_t child) {
    for (;;) {
        siginfo_t info{};
        const int signal_number = ::sigwaitinfo(&waited_, &info);
        if (signal_number < 0) {
            if (errno == EINTR)
                continue;
            throw std::system_error(errno, std::generic_category(), "sigwaitinfo");
        }
        if (signal_number == SIGCHLD) {
            // Also sent when the child stops or continues: only its end ends the wait.
            int status = 0;
            const pid_t ended = ::waitpid(child, &status, WNOHANG);
            if (ended == child)
                return status;
            if (ended < 0 && errno != EINTR)
                throw std::system_error(errno, std::generic_category(), "waitpid");
            continue;
        }
        if (sent_by_a_process(info))
            origins_[signal_number] = SignalOrigin{info.si_pid, info.si_uid, command_name(info.si_pid)};
        const bool in_our_group = ::getpgid(child) == ::getpgrp();
        if (group_interrupts_ && signal_number == SIGINT && in_our_group)
            continue;
        if (should_forward(info, child, in_our_group))
            ::kill(child, signal_number);
    }
}

std::optional<SignalOrigin> Supervision::origin_of(int signal_number) const {
    const auto origin = origins_.find(signal_number);
    return origin == origins_.end() ? std::nullopt : std::optional(origin->second);
}

void Supervision::exit_on_signal(const std::string& message, int exit_status) {
    const std::string line = message + "\n";
    g_interrupted_length = std::min(line.size(), sizeof g_interrupted_message);
    std::memcpy(g_interrupted_message, line.data(), g_interrupted_length);
    g_interrupted_status = exit_status;
    sigset_t forwarded;
    sigemptyset(&forwarded);
    struct sigaction action {};
    action.sa_handler = on_signal_after_command;
    for (int signal_number : forwarded_) {
        ::sigaction(signal_number, &action, nullptr);
        sigaddset(&forwarded, signal_number);
    }
    const timespec now{};
    while (::sigtimedwait(&forwarded, nullptr, &now) > 0) {
    }
    ::sigprocmask(SIG_UNBLOCK, &forwarded, nullptr);
}

} // namespace gpuleak::launcher
