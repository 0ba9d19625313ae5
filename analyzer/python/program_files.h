// Which Python source files are the program's own code, as its author reads a stack: not an installed
// package's (site-packages, dist-packages), the standard library's, the interpreter's frozen modules or
// gpuleak's own package.
#pragma once

#include <string_view>

namespace gpuleak::analyzer {

bool is_program_file(std::string_view file);

} // namespace gpuleak::analyzer
