#include "render/wrapped_text.h"

namespace gpuleak::analyzer {

size_t columns(std::string_view text) {
    size_t count = 0;
    for (const char c : text)
        count += (static_cast<unsigned char>(c) & 0xc0) != 0x80 ? 1 : 0;
    return count;
}

std::string cut_to_columns(std::string_view text, size_t most) {
    if (columns(text) <= most)
        return std::string(text);
    size_t cut = 0;
    for (size_t kept = 0; cut < text.size() && kept + 1 < most; ++kept)
        do
            ++cut;
        while (cut < text.size() && (static_cast<unsigned char>(text[cut]) & 0xc0) == 0x80);
    return std::string(text.substr(0, cut)) + "…";
}

std::string wrapped(std::string_view text, std::string_view indent, std::string_view first_indent) {
    std::string out;
    std::string line(first_indent);
    size_t prefix = first_indent.size();
    size_t start = 0;
    while (start < text.size()) {
        size_t end = text.find(' ', start);
        if (end == std::string_view::npos)
            end = text.size();
        // "4 %" reads as one word: a word and the "%..." after it move down together.
        while (end < text.size() && text.substr(end + 1).starts_with('%')) {
            end = text.find(' ', end + 1);
            if (end == std::string_view::npos)
                end = text.size();
        }
        const std::string_view word = text.substr(start, end - start);
        if (line.size() > prefix && columns(line) + 1 + columns(word) > kWrapColumn) {
            out += line + "\n";
            line = indent;
            prefix = indent.size();
        }
        if (line.size() > prefix)
            line += " ";
        line += word;
        start = end + 1;
    }
    return out + line + "\n";
}

} // namespace gpuleak::analyzer
