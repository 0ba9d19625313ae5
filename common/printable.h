// Strings from a trace or from a program (a command line, a file name, a Python qualified name, a marker,
// a notebook cell's text) as text output and stderr lines show them: whoever wrote them cannot drive the
// terminal that reads a report or make a line of its own in it.
#pragma once

#include <cstddef>
#include <span>
#include <string>
#include <string_view>

namespace gpuleak {

// Writes `text` into `out` as one line that a terminal shows as it reads: the C0 and C1 control
// characters and DEL, the line and paragraph separators and the bidirectional controls that reorder what
// follows are escaped (`\n`, `\t`, `\x1b`, `\u009b`, `\u202e`), as is each byte that is not part of UTF-8
// (`\xff`); the rest stays as it is. Returns the bytes written: where `out` is too small it ends before
// the character or escape that did not fit. Takes no heap memory. JSON needs none of this: its strings
// are escaped by the format.
size_t printable_into(std::string_view text, std::span<char> out);

// How many of the first `most` bytes of `text` to keep so as not to cut a UTF-8 sequence: `most`, less the
// continuation bytes of a character it would cut (text.size() where that is shorter).
size_t utf8_prefix_bytes(std::string_view text, size_t most);

// The same, whole. An escape is at most four times as long as what it stands for.
inline std::string printable(std::string_view text) {
    std::string out(4 * text.size(), '\0');
    out.resize(printable_into(text, out));
    return out;
}

} // namespace gpuleak
