#include "launcher/python_package.h"

#include <fmt/format.h>

#include "launcher/launcher_error.h"
#include "launcher/shared_files.h"

namespace gpuleak::launcher {

namespace {

constexpr const char* kMarker = "gpuleak/__init__.py";

} // namespace

std::string find_python_package() {
    std::string why;
    if (std::optional<std::string> found = find_shared("python", kMarker, why))
        return *found;
    throw LauncherError(fmt::format("cannot find the gpuleak Python package ({})", why));
}

std::optional<std::string> python_package_if_any() {
    std::string why;
    return find_shared("python", kMarker, why);
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
