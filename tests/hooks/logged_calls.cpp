#include "logged_calls.h"

#include <catch2/catch.hpp>

#include <algorithm>
#include <sstream>

namespace {

auto field_named(const std::vector<std::pair<std::string, std::string>>& fields, const std::string& key) {
    return std::find_if(fields.begin(), fields.end(), [&](const auto& field) { return field.first == key; });
}

} // namespace

bool LoggedCall::has(const std::string& key) const {
    return field_named(fields, key) != fields.end();
}

const std::string& LoggedCall::text(const std::string& key) const {
    const auto found = field_named(fields, key);
    if (found == fields.end())
        FAIL("no field " << key << " in the log line '" << line << "'");
    return found->second;
}

uint64_t LoggedCall::number(const std::string& key) const {
    return log_number(text(key));
}

std::vector<LoggedCall> logged_calls(const std::vector<LogLine>& lines) {
    std::vector<LoggedCall> calls;
    for (const LogLine& words : lines) {
        if (words.size() < 2)
            continue;
        LoggedCall call{words[0], words[1], {}, words[0] + " " + words[1]};
        for (size_t i = 2; i < words.size(); ++i) {
            call.line += " " + words[i];
            const size_t equals = words[i].find('=');
            if (equals == std::string::npos && !call.fields.empty())
                call.fields.back().second += " " + words[i];
            else
                call.fields.emplace_back(words[i].substr(0, equals),
                                         equals == std::string::npos ? "" : words[i].substr(equals + 1));
        }
        calls.push_back(std::move(call));
    }
    return calls;
}

std::vector<std::string> comparable(const std::vector<LoggedCall>& calls,
                                    const std::vector<std::string>& varying) {
    std::vector<std::string> lines;
    for (const LoggedCall& call : calls) {
        std::string line = call.op + " " + call.name;
        for (const auto& [name, value] : call.fields)
            if (std::find(varying.begin(), varying.end(), name) == varying.end())
                line += " " + name + "=" + value;
        lines.push_back(std::move(line));
    }
    return lines;
}

RunOptions with_environment(std::vector<std::string> entries) {
    RunOptions options;
    options.environment = std::move(entries);
    return options;
}

RunOptions without_gpuleak(RunOptions options) {
    options.preload = false;
    return options;
}

LoggedRun run_logged(const TempDir& directory, const std::string& program,
                     const std::vector<std::string>& arguments, const RunOptions& options) {
    const std::string log = directory.path() + "/program.log";
    std::vector<std::string> all{log};
    all.insert(all.end(), arguments.begin(), arguments.end());
    LoggedRun result{run_traced(directory, program, all, options), {}};
    result.calls = logged_calls(read_log(log));
    return result;
}

gpuleak::analyzer::TraceReader only_trace(const TracedRun& run) {
    const std::vector<std::string> traces = run.traces();
    INFO("stderr: " << run.err);
    REQUIRE(traces.size() == 1);
    return gpuleak::analyzer::TraceReader::open(traces[0]);
}

std::vector<std::string> gpuleak_lines(const std::string& text) {
    std::vector<std::string> lines;
    std::istringstream stream(text);
    for (std::string line; std::getline(stream, line);)
        if (line.rfind("gpuleak: ", 0) == 0)
            lines.push_back(line);
    return lines;
}
