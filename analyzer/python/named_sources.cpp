#include "python/named_sources.h"

#include "python/source_files.h"

namespace gpuleak::analyzer {

NamedSources::NamedSources(const TraceReader& trace) {
    for (const Event& event : trace.notable_events().events) {
        if (event.type != format::EventType::SourceName)
            continue;
        const std::string* file = trace.string(event.source_file());
        const std::string* name = trace.string(event.source_name());
        // A record whose strings were lost (a torn strings region) names nothing.
        if (file == nullptr || name == nullptr)
            continue;
        const std::string* text = trace.string(event.source_text());
        by_file_[*file] = Source{*name, text != nullptr ? split_lines(*text) : std::vector<std::string>{}};
    }
}

std::optional<NamedLine> NamedSources::find(const std::string& file, uint32_t line) const {
    const auto source = by_file_.find(file);
    if (source == by_file_.end())
        return std::nullopt;
    const std::vector<std::string>& lines = source->second.lines;
    return NamedLine{source->second.name, line_text(lines, line)};
}

} // namespace gpuleak::analyzer
