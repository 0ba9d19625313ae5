// What gpuleak installs under <prefix>/share/gpuleak (the Python package, the PyTorch adapter's source
// and build script), found from the launcher's own executable as libgpuleak.so is.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace gpuleak::launcher {

// Where the shared directory `part` may be, most likely first, for the launcher's executable at
// `executable`: <prefix>/share/gpuleak/<part> for <prefix>/bin/gpuleak, then <part> in the source tree
// this build was configured from.
std::vector<std::string> shared_candidates(const std::filesystem::path& executable, const std::string& part);

// The first of those holding the file `marker`, or nothing, with `why` saying where it looked.
std::optional<std::string> find_shared(const std::string& part, const std::filesystem::path& marker,
                                       std::string& why);

} // namespace gpuleak::launcher
