// The one error the analyzer reports for a trace it cannot use. what() is a single line that names the
// file and the problem, so a command-line tool can print it as is and exit.
#pragma once

#include <stdexcept>
#include <string>

namespace gpuleak::analyzer {

class TraceError : public std::runtime_error {
  public:
    TraceError(const std::string& file, const std::string& problem)
        : std::runtime_error(file + ": " + problem) {}
};

} // namespace gpuleak::analyzer
