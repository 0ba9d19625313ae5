#include "python_package.h"

#include <filesystem>
#include <fmt/format.h>
#include <system_error>

#include "launcher_error.h"

namespace gpuleak::launcher {

namespace fs = std::filesystem;

std::vector<std::string> package_candidates(const std::string& executable) {
    const fs::path bin = fs::path(executable).parent_path();
    return {(bin / ".." / "share" / "gpuleak" / "python").lexically_normal().string(),
            GPULEAK_SOURCE_PYTHON_DIR};
}

namespace {

// The package's directory, or why there is none.
std::optional<std::string> look_for_python_package(std::string& why) {
    std::error_code error;
    const fs::path executable = fs::read_symlink("/proc/self/exe", error);
    if (error) {
        why = fmt::format("/proc/self/exe: {}", error.message());
        return std::nullopt;
    }
    const std::vector<std::string> candidates = package_candidates(executable.string());
    for (const std::string& candidate : candidates)
        if (fs::is_regular_file(fs::path(candidate) / "gpuleak" / "__init__.py", error))
            return candidate;
    why = fmt::format("looked in {}", fmt::join(candidates, ", "));
    return std::nullopt;
}

} // namespace

std::string find_python_package() {
    std::string why;
    if (std::optional<std::string> found = look_for_python_package(why))
        return *found;
    throw LauncherError(fmt::format("cannot find the gpuleak Python package ({})", why));
}

std::optional<std::string> python_package_if_any() {
    std::string why;
    return look_for_python_package(why);
}

std::string python_path(const std::string& directory, const std::string& existing) {
    std::string value = directory;
    size_t start = 0;
    while (start <= existing.size()) {
        size_t end = existing.find(':', start);
        if (end == std::string::npos)
            end = existing.size();
        // An empty entry means the current directory to Python: kept, as the user wrote it.
        const std::string entry = existing.substr(start, end - start);
        if (entry != directory)
            value += ":" + entry;
        start = end + 1;
    }
    return existing.empty() ? directory : value;
}

} // namespace gpuleak::launcher
