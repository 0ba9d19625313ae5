#include "launcher/child_environment.h"

#include <algorithm>
#include <fmt/format.h>
#include <map>
#include <set>

#include "gpuleak/config_limits.h"
#include "launcher/launcher_error.h"
#include "launcher/preload_library.h"

extern char** environ;

namespace gpuleak::launcher {

std::vector<std::string> process_environment() {
    std::vector<std::string> entries;
    for (char** entry = environ; *entry != nullptr; ++entry)
        entries.emplace_back(*entry);
    return entries;
}

void set_variable(std::vector<std::string>& environment, const std::string& name, const std::string& value) {
    const std::string prefix = name + "=";
    for (std::string& entry : environment)
        if (entry.starts_with(prefix)) {
            entry = prefix + value;
            return;
        }
    environment.push_back(prefix + value);
}

void unset_variable(std::vector<std::string>& environment, const std::string& name) {
    const std::string prefix = name + "=";
    std::erase_if(environment, [&](const std::string& entry) { return entry.starts_with(prefix); });
}

std::string variable(const std::vector<std::string>& environment, const std::string& name) {
    const std::string prefix = name + "=";
    for (const std::string& entry : environment)
        if (entry.starts_with(prefix))
            return entry.substr(prefix.size());
    return {};
}

std::string output_pattern(const std::string& directory) {
    std::string pattern;
    // The recorder expands %-sequences in the whole pattern, the directory included.
    for (char c : directory)
        pattern += c == '%' ? std::string("%%") : std::string(1, c);
    pattern += "/gpuleak.%r%p.trace";
    if (pattern.size() >= kOutputPatternCapacity)
        throw LauncherError(fmt::format("{}: the output directory's path is too long for GPULEAK_OUTPUT "
                                        "(at most {} bytes in all)",
                                        directory, kOutputPatternCapacity - 1));
    return pattern;
}

std::vector<std::string> child_environment(const std::vector<std::string>& current,
                                           const std::string& library, const std::string& pattern,
                                           const RunRequest& request, const std::string& python_package) {
    // The first of several, as getenv reads them.
    const auto preload = std::find_if(current.begin(), current.end(), [](const std::string& entry) {
        return entry.rfind("LD_PRELOAD=", 0) == 0;
    });
    const std::string existing_preload =
        preload == current.end() ? "" : preload->substr(preload->find('=') + 1);
    std::map<std::string, std::string> settings{
        {"LD_PRELOAD", preload_list(library, existing_preload)},
        {"GPULEAK_OUTPUT", pattern},
    };
    if (request.max_mb)
        settings["GPULEAK_MAX_MB"] = std::to_string(*request.max_mb);
    if (request.stack_depth)
        settings["GPULEAK_STACK_DEPTH"] = std::to_string(*request.stack_depth);
    if (request.sample_ms)
        settings["GPULEAK_SAMPLE_MS"] = std::to_string(*request.sample_ms);
    if (request.no_python)
        settings["GPULEAK_PYTHON"] = "0";
    if (request.quiet)
        settings["GPULEAK_QUIET"] = "1";
    if (!python_package.empty())
        settings["GPULEAK_PYTHON_PACKAGE"] = python_package;

    std::vector<std::string> environment;
    std::set<std::string> placed;
    for (const std::string& entry : current) {
        const std::string name = entry.substr(0, entry.find('='));
        const auto setting = settings.find(name);
        if (setting == settings.end())
            environment.push_back(entry);
        // Set once, where it was: a second entry of the same name would be ambiguous to getenv.
        else if (placed.insert(name).second)
            environment.push_back(fmt::format("{}={}", name, setting->second));
    }
    for (const auto& [name, value] : settings)
        if (placed.count(name) == 0)
            environment.push_back(fmt::format("{}={}", name, value));
    return environment;
}

} // namespace gpuleak::launcher
