// The text of a line of Python source: what the report shows beside the program's own line, as a
// traceback does. From the file on disk, read when the report is made (a file changed since the run shows
// its new text, as Python's tracebacks do), or from the text a program named (named_sources.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace gpuleak::analyzer {

std::vector<std::string> split_lines(const std::string& text);

// Line `line` (1-based) of `lines` without the white space around it, its first kMostLineBytes at most
// (cut at a character's start); empty when there is no such line.
std::string line_text(const std::vector<std::string>& lines, uint32_t line);
constexpr size_t kMostLineBytes = 1024;

class SourceFiles {
  public:
    // Line `line` of the file at `path`, or empty where it cannot be read: a relative path, no such file,
    // not a regular file, larger than any source file (kMostSourceBytes).
    std::string line(const std::string& path, uint32_t line);

  private:
    std::map<std::string, std::vector<std::string>> files_;
};

constexpr uint64_t kMostSourceBytes = 16 << 20;

} // namespace gpuleak::analyzer
