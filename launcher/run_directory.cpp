#include "launcher/run_directory.h"

#include <cctype>
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <fmt/format.h>
#include <sys/stat.h>

#include "common/directory_trust.h"
#include "launcher/launcher_error.h"

namespace gpuleak::launcher {

namespace fs = std::filesystem;

namespace {

// Traces hold stacks, paths and command lines: readable by the owner only, like the traces themselves.
constexpr mode_t kDirectoryMode = 0700;
constexpr size_t kMaxCommandChars = 40;
constexpr int kMaxSuffix = 1000;

// The command's file name, reduced to characters that need no quoting in a shell.
std::string name_part(const std::string& command) {
    std::string name = fs::path(command).filename().string();
    if (name.size() > kMaxCommandChars)
        name.resize(kMaxCommandChars);
    for (char& c : name)
        if (!(std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '.' || c == '_' || c == '-'))
            c = '_';
    return name.empty() || name[0] == '.' ? "command" + name : name;
}

RunDirectory fresh_directory(const std::string& command, std::time_t started, const std::string& parent) {
    std::tm local{};
    localtime_r(&started, &local);
    char stamp[32];
    std::strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", &local);
    const fs::path base = fs::absolute(parent) / fmt::format("gpuleak-{}-{}", name_part(command), stamp);
    for (int suffix = 1; suffix <= kMaxSuffix; ++suffix) {
        const fs::path path = suffix == 1 ? base : fs::path(fmt::format("{}-{}", base.string(), suffix));
        // mkdir is the test: another run starting in the same second cannot take the same directory.
        if (::mkdir(path.c_str(), kDirectoryMode) == 0)
            return {path.lexically_normal().string(), true};
        if (errno != EEXIST)
            throw LauncherError(fmt::format("cannot create the output directory {}: {}; name another with -o",
                                            path.string(), std::strerror(errno)));
    }
    throw LauncherError(fmt::format("cannot create the output directory {}: every name up to -{} is taken",
                                    base.string(), kMaxSuffix));
}

RunDirectory requested_directory(const std::string& requested) {
    const fs::path path = fs::absolute(requested).lexically_normal();
    std::error_code error;
    if (fs::exists(path, error)) {
        if (!fs::is_directory(path, error))
            throw LauncherError(fmt::format("-o {}: not a directory", requested));
        if (!fs::is_empty(path, error) || error)
            throw LauncherError(fmt::format(
                "-o {}: directory is not empty; traces of two runs would be reported as one", requested));
        return {path.string(), false};
    }
    if (path.has_parent_path())
        fs::create_directories(path.parent_path(), error);
    if (error || ::mkdir(path.c_str(), kDirectoryMode) != 0)
        throw LauncherError(fmt::format("-o {}: cannot create the directory: {}", requested,
                                        error ? error.message() : std::strerror(errno)));
    return {path.string(), true};
}

// Held from here on: what the launcher writes goes into the directory checked.
void open_and_check(RunDirectory& directory, const std::string& named) {
    directory.handle = FileDescriptor(::open(directory.path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    const char* distrust =
        directory.handle.get() < 0 ? std::strerror(errno) : directory_distrust(directory.handle.get());
    if (distrust == nullptr)
        return;
    remove_if_unused(directory);
    throw LauncherError(fmt::format("{}: the directory is {}: others could read, replace or remove the run's "
                                    "traces and report; name a directory of your own with -o",
                                    named, distrust));
}

} // namespace

RunDirectory make_run_directory(const std::string& requested, const std::string& command, std::time_t started,
                                const std::string& parent) {
    RunDirectory directory =
        requested.empty() ? fresh_directory(command, started, parent) : requested_directory(requested);
    open_and_check(directory, requested.empty() ? directory.path : "-o " + requested);
    return directory;
}

void remove_if_unused(const RunDirectory& directory) {
    if (directory.created)
        ::rmdir(directory.path.c_str()); // fails, as it should, when anything is in it
}

} // namespace gpuleak::launcher
