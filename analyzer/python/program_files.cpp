#include "program_files.h"

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
    return !(path.parent_path().filename() == "gpuleak" && path.filename().string().starts_with("_"));
}

} // namespace gpuleak::analyzer
