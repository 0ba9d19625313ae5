// The launcher's signals while the command runs and after. The signals that would otherwise end the
// launcher (SIGHUP, SIGINT, SIGQUIT, SIGTERM, SIGUSR1, SIGUSR2) go on to the command, which decides what
// they mean; the launcher ends when the command does, with its status.
#pragma once

#include <csignal>
#include <map>
#include <optional>
#include <string>
#include <sys/types.h>
#include <vector>

namespace gpuleak::launcher {

// Who sent a signal to the launcher: a process, named by its /proc/PID/comm as the signal arrived.
struct SignalOrigin {
    pid_t pid = 0;
    uid_t uid = 0;
    std::string name;
};

// Whether a signal the launcher received should be sent on to the command, the launcher's child.
// `child_in_our_process_group`: the child has not moved to a process group of its own.
bool should_forward(const siginfo_t& info, pid_t child, bool child_in_our_process_group);

// From construction, the forwarded signals and SIGCHLD are blocked and taken with sigwaitinfo, so that
// none is lost between fork and wait; signals the launcher's parent set to be ignored (nohup) are left
// ignored, and not forwarded. The destructor restores the signal mask and SIGCHLD's action.
class Supervision {
  public:
    // `group_interrupts`: SIGINT is not forwarded while the child is in the launcher's process group. For
    // a Jupyter kernel: Jupyter interrupts a kernel by signalling its launcher's process group, so the
    // kernel has the SIGINT already, and a second one would interrupt its handling of the first.
    explicit Supervision(bool group_interrupts = false);
    ~Supervision();
    Supervision(const Supervision&) = delete;
    Supervision& operator=(const Supervision&) = delete;

    // In the forked child, before exec: the signal mask and SIGCHLD's action the launcher started with.
    // Async-signal-safe.
    void restore_in_child() const noexcept;

    // Forwards signals to `child` until it ends; returns its wait status.
    [[nodiscard]] int wait_forwarding(pid_t child);

    // The process that last sent the launcher `signal_number` while the command ran, if one did (not
    // the terminal, nor the kernel).
    [[nodiscard]] std::optional<SignalOrigin> origin_of(int signal_number) const;

    // Once the command has ended: a forwarded signal (a second Ctrl-C while the report is built) writes
    // `message` (one line) on stderr and ends the launcher with `exit_status`, the command's. Signals that
    // arrived while the command ran were about the command, and are dropped.
    void exit_on_signal(const std::string& message, int exit_status);

  private:
    std::vector<int> forwarded_;
    std::map<int, SignalOrigin> origins_;
    bool group_interrupts_ = false;
    sigset_t waited_{};
    sigset_t original_mask_{};
    struct sigaction original_sigchld_ {};
};

} // namespace gpuleak::launcher
