#include "python/program_files.h"

#include <filesystem>
#include <iterator>
#include <string>

namespace gpuleak::analyzer {

bool is_program_file(std::string_view file) {
    if (file.empty() || file.starts_with("<frozen ") ||
        file.find("/site-packages/") != std::string_view::npos ||
        file.find("/dist-packages/") != std::string_view::npos)
        return false;
    const std::filesystem::path path(file);
    // The standard library: lib/python3.12/*.py and its packages (lib/python3.12/json/...).
    for (auto part = path.begin(); part != path.end(); ++part)
        if (part->string().starts_with("python3.") && part != path.begin() &&
            std::prev(part)->string() == "lib")
            return false;
    // gpuleak's own modules are none of the program's, its subpackages' neither (gpuleak/_why/_search.py).
    const std::filesystem::path directory = path.parent_path();
    if (directory.filename() == "gpuleak")
        return !path.filename().string().starts_with("_");
    return !(directory.parent_path().filename() == "gpuleak" &&
             directory.filename().string().starts_with("_"));
}

} // namespace gpuleak::analyzer
