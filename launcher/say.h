// The launcher's lines on stderr (stdout belongs to the command), each prefixed "gpuleak: ".
#pragma once

#include <cstdio>
#include <fmt/format.h>
#include <string>

#include "common/printable.h"
#include "render/wrapped_text.h"

namespace gpuleak::launcher {

// What a line names (the command, trace paths, markers, the program's lines) may hold anything: it stays
// one line and drives no terminal.
inline void say(const std::string& line) {
    fmt::print(stderr, "gpuleak: {}\n", printable(line));
}

// A paragraph of the summary (the diagnosis, the exception the program ended with): broken into lines of
// at most 100 columns, the first prefixed "gpuleak: ", the rest indented under it.
inline void say_wrapped(const std::string& paragraph) {
    fmt::print(stderr, "{}", analyzer::wrapped(printable(paragraph), "         ", "gpuleak: "));
}

} // namespace gpuleak::launcher
