// The launcher's lines on stderr (stdout belongs to the command), each prefixed "gpuleak: ".
#pragma once

#include <cstdio>
#include <fmt/format.h>
#include <string>

#include "printable.h"

namespace gpuleak::launcher {

// What a line names (the command, trace paths, markers, the program's lines) may hold anything: it stays
// one line and drives no terminal.
inline void say(const std::string& line) {
    fmt::print(stderr, "gpuleak: {}\n", printable(line));
}

} // namespace gpuleak::launcher
