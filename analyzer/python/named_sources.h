// Sources a program named (gpuleak_name_source): a notebook's cells, compiled under file names that
// exist nowhere on disk, and what the report calls them instead ("cell [12]") with their text, so that a
// Python frame of such a file reads "cell [12], line 4" and shows the line.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "read/trace_reader.h"

namespace gpuleak::analyzer {

struct NamedLine {
    std::string name; // "cell [12]"
    std::string text; // the line's text without the whitespace around it; empty when unknown
};

class NamedSources {
  public:
    NamedSources() = default;
    // From the trace's SourceName records, in the order they were made: a later naming of a file (the
    // same cell text run again) replaces an earlier one.
    explicit NamedSources(const TraceReader& trace);

    // What line `line` (1-based; 0: unknown) of `file` is called; nothing when the file was not named.
    [[nodiscard]] std::optional<NamedLine> find(const std::string& file, uint32_t line) const;

  private:
    struct Source {
        std::string name;
        std::vector<std::string> lines;
    };
    std::map<std::string, Source> by_file_;
};

} // namespace gpuleak::analyzer
