#include "python/source_files.h"

#include <filesystem>
#include <fstream>
#include <iterator>

#include "common/printable.h"

namespace gpuleak::analyzer {

std::vector<std::string> split_lines(const std::string& text) {
    std::vector<std::string> lines;
    size_t start = 0;
    while (start < text.size()) {
        size_t end = text.find('\n', start);
        if (end == std::string::npos)
            end = text.size();
        lines.push_back(text.substr(start, end - start));
        start = end + 1;
    }
    return lines;
}

std::string line_text(const std::vector<std::string>& lines, uint32_t line) {
    if (line < 1 || line > lines.size())
        return {};
    const std::string& text = lines[line - 1];
    constexpr const char* kSpace = " \t\r\f\v";
    const size_t first = text.find_first_not_of(kSpace);
    if (first == std::string::npos)
        return {};
    std::string trimmed = text.substr(first, text.find_last_not_of(kSpace) - first + 1);
    trimmed.resize(utf8_prefix_bytes(trimmed, kMostLineBytes));
    return trimmed;
}

std::string SourceFiles::line(const std::string& path, uint32_t line) {
    // A relative name is relative to where the program ran, which the report does not know.
    if (!path.starts_with('/'))
        return {};
    auto file = files_.find(path);
    if (file == files_.end()) {
        std::vector<std::string> lines;
        std::error_code error;
        const std::filesystem::file_status status = std::filesystem::status(path, error);
        if (!error && std::filesystem::is_regular_file(status) &&
            std::filesystem::file_size(path, error) <= kMostSourceBytes && !error) {
            std::ifstream stream(path, std::ios::binary);
            const std::string text((std::istreambuf_iterator<char>(stream)),
                                   std::istreambuf_iterator<char>());
            lines = split_lines(text);
        }
        file = files_.emplace(path, std::move(lines)).first;
    }
    return line_text(file->second, line);
}

} // namespace gpuleak::analyzer
