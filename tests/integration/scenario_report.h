// What the report tests share: the line a scenario's source tags, and gpuleak-report's JSON of traces.
// The including test defines GPULEAK_REPORT and GPULEAK_PROGRAMS_SOURCE_DIR.
#pragma once

#include <catch2/catch.hpp>

#include <cstdint>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "traced_run.h"

// The line of a scenario's source that carries `tag` in a comment: where the report must point.
inline uint32_t line_of(const std::string& source, const std::string& tag) {
    std::ifstream file(std::string(GPULEAK_PROGRAMS_SOURCE_DIR) + "/" + source);
    std::string line;
    for (uint32_t number = 1; std::getline(file, line); ++number)
        if (line.find("// " + tag) != std::string::npos)
            return number;
    FAIL("no line tagged '" << tag << "' in " << source);
    return 0;
}

// What gpuleak-report prints for `traces` in `format` ("text": without colours).
inline std::string report_output(const TempDir& dir, const std::string& format,
                                 const std::vector<std::string>& traces) {
    std::vector<std::string> arguments{"--format", format, "--no-color"};
    arguments.insert(arguments.end(), traces.begin(), traces.end());
    RunOptions options;
    options.preload = false;
    TracedRun report = run_traced(dir, GPULEAK_REPORT, arguments, options);
    INFO(report.err);
    REQUIRE(report.exited_with(0));
    return report.out;
}

inline nlohmann::json report_json(const TempDir& dir, const std::vector<std::string>& traces) {
    return nlohmann::json::parse(report_output(dir, "json", traces));
}
