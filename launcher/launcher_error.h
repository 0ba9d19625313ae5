// A failure of the launcher itself, said in one line, with the exit status it ends the launcher with.
#pragma once

#include <stdexcept>
#include <string>

namespace gpuleak::launcher {

// As env, nice and timeout do: 125 when the launcher fails before the command runs, 126 when the command
// cannot be executed, 127 when it is not found; 1 to 124 and 128+N stay the command's own statuses.
inline constexpr int kLauncherFailed = 125;
inline constexpr int kCannotExecute = 126;
inline constexpr int kNotFound = 127;

class LauncherError : public std::runtime_error {
  public:
    explicit LauncherError(const std::string& message, int exit_status = kLauncherFailed)
        : std::runtime_error(message), exit_status_(exit_status) {}
    [[nodiscard]] int exit_status() const { return exit_status_; }

  private:
    int exit_status_;
};

} // namespace gpuleak::launcher
