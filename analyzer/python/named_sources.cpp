#include "named_sources.h"

namespace gpuleak::analyzer {

namespace {

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

std::string trimmed(const std::string& text) {
    constexpr const char* kSpace = " \t\r\f\v";
    const size_t first = text.find_first_not_of(kSpace);
    if (first == std::string::npos)
        return {};
    return text.substr(first, text.find_last_not_of(kSpace) - first + 1);
}

} // namespace

NamedSources::NamedSources(const TraceReader& trace) {
    for (const Event& event : trace.notable_events().events) {
        if (event.type != format::EventType::SourceName)
            continue;
        const std::string* file = trace.string(event.address);
        const std::string* name = trace.string(event.size);
        // A record whose strings were lost (a torn strings region) names nothing.
        if (file == nullptr || name == nullptr)
            continue;
        const std::string* text = trace.string(event.stream);
        by_file_[*file] = Source{*name, text != nullptr ? split_lines(*text) : std::vector<std::string>{}};
    }
}

std::optional<NamedLine> NamedSources::find(const std::string& file, uint32_t line) const {
    const auto source = by_file_.find(file);
    if (source == by_file_.end())
        return std::nullopt;
    const std::vector<std::string>& lines = source->second.lines;
    return NamedLine{source->second.name, line >= 1 && line <= lines.size() ? trimmed(lines[line - 1]) : ""};
}

} // namespace gpuleak::analyzer
