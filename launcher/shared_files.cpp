#include "launcher/shared_files.h"

#include <filesystem>
#include <fmt/format.h>
#include <system_error>

namespace gpuleak::launcher {

namespace fs = std::filesystem;

std::vector<std::string> shared_candidates(const fs::path& executable, const std::string& part) {
    const fs::path bin = executable.parent_path();
    return {(bin / ".." / "share" / "gpuleak" / part).lexically_normal().string(),
            (fs::path(GPULEAK_SOURCE_DIR) / part).string()};
}

std::optional<std::string> find_shared(const std::string& part, const fs::path& marker, std::string& why) {
    std::error_code error;
    const fs::path executable = fs::read_symlink("/proc/self/exe", error);
    if (error) {
        why = fmt::format("/proc/self/exe: {}", error.message());
        return std::nullopt;
    }
    const std::vector<std::string> candidates = shared_candidates(executable, part);
    for (const std::string& candidate : candidates)
        if (fs::is_regular_file(fs::path(candidate) / marker, error))
            return candidate;
    why = fmt::format("looked in {}", fmt::join(candidates, ", "));
    return std::nullopt;
}

} // namespace gpuleak::launcher
