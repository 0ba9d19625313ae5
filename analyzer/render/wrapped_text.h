// Text laid out for a terminal of kWrapColumn columns: the text report's paragraphs and `gpuleak run`'s
// summary.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace gpuleak::analyzer {

constexpr size_t kWrapColumn = 100;

// `text` broken at spaces into lines of at most kWrapColumn columns (a word longer than a line, such as a
// path, stands alone on its line), each ending with a newline: the first begins with `first_indent`, the
// rest with `indent`. Columns are counted in characters (UTF-8), not bytes.
std::string wrapped(std::string_view text, std::string_view indent, std::string_view first_indent);
inline std::string wrapped(std::string_view text, std::string_view indent) {
    return wrapped(text, indent, indent);
}

// How many columns `text` takes: its UTF-8 characters.
size_t columns(std::string_view text);

// `text` in at most `most` columns (at least 1): where it is longer, cut at a character's start and
// ended with "…".
std::string cut_to_columns(std::string_view text, size_t most);

} // namespace gpuleak::analyzer
