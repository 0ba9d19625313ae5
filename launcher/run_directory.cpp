#include "launcher/run_directory.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/directory_trust.h"
#include "launcher/child_environment.h"
#include "launcher/launcher_error.h"

namespace gpuleak::launcher {

namespace fs = std::filesystem;

namespace {

// Traces hold stacks, paths and command lines: readable by the owner only, like the traces themselves.
constexpr mode_t kDirectoryMode = 0700;
constexpr size_t kMaxCommandChars = 40;
constexpr int kMaxSuffix = 1000;

// `text` reduced to characters that need no quoting in a shell, `fallback` put before a name that would be
// empty or hidden.
std::string safe_name(std::string text, const char* fallback) {
    for (char& c : text)
        if (!(std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '.' || c == '_' || c == '-'))
            c = '_';
    return text.empty() || text[0] == '.' ? fallback + text : text;
}

// The command's file name, so reduced.
std::string name_part(const std::string& command) {
    std::string name = fs::path(command).filename().string();
    if (name.size() > kMaxCommandChars)
        name.resize(kMaxCommandChars);
    return safe_name(name, "command");
}

// A whole number of at most 9 digits, as a job's launchers write them; none otherwise.
std::optional<int> count_of(const std::string& text) {
    if (text.empty() || text.size() > 9 || !std::all_of(text.begin(), text.end(), [](char c) {
            return std::isdigit(static_cast<unsigned char>(c));
        }))
        return std::nullopt;
    return std::stoi(text);
}

// torchrun's options before its script: the value of `--name VALUE` or `--name=VALUE` (torchrun takes
// `--node-rank` and `--node_rank` alike); none where not given.
std::optional<std::string> torchrun_option(const std::vector<std::string>& arguments,
                                           std::initializer_list<const char*> names) {
    for (size_t i = 0; i < arguments.size() && !arguments[i].ends_with(".py"); ++i)
        for (const std::string name : names) {
            if (arguments[i] == name && i + 1 < arguments.size())
                return arguments[i + 1];
            if (arguments[i].starts_with(name + "="))
                return arguments[i].substr(name.size() + 1);
        }
    return std::nullopt;
}

// torchrun's own arguments, when `command` runs it: as `torchrun ...` or `python -m torch.distributed.run`
// (or .launch).
std::optional<std::vector<std::string>> torchrun_arguments(const std::vector<std::string>& command) {
    if (command.empty())
        return std::nullopt;
    if (fs::path(command[0]).filename() == "torchrun")
        return std::vector<std::string>(command.begin() + 1, command.end());
    for (size_t i = 1; i + 1 < command.size(); ++i)
        if (command[i] == "-m")
            return command[i + 1] == "torch.distributed.run" || command[i + 1] == "torch.distributed.launch"
                       ? std::optional(std::vector<std::string>(
                             command.begin() + static_cast<std::ptrdiff_t>(i) + 2, command.end()))
                       : std::nullopt;
    return std::nullopt;
}

// Makes the directory `base`, else `base`-2, -3, ... where it is taken: mkdir is the test, so that another
// launch at the same moment (a run started in the same second, another task of a job, on a shared
// filesystem too) cannot take the same one. `advice` ends the message of a directory that cannot be made.
RunDirectory first_free_directory(const fs::path& base, const char* advice) {
    for (int suffix = 1; suffix <= kMaxSuffix; ++suffix) {
        const fs::path path = suffix == 1 ? base : fs::path(fmt::format("{}-{}", base.string(), suffix));
        if (::mkdir(path.c_str(), kDirectoryMode) == 0)
            return {path.lexically_normal().string(), true};
        if (errno != EEXIST)
            throw LauncherError(fmt::format("cannot create the output directory {}: {}{}", path.string(),
                                            std::strerror(errno), advice));
    }
    throw LauncherError(fmt::format("cannot create the output directory {}: every name up to -{} is taken",
                                    base.string(), kMaxSuffix));
}

RunDirectory fresh_directory(const std::string& command, std::time_t started, const std::string& parent) {
    std::tm local{};
    localtime_r(&started, &local);
    char stamp[32];
    std::strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", &local);
    return first_free_directory(fs::absolute(parent) /
                                    fmt::format("gpuleak-{}-{}", name_part(command), stamp),
                                "; name another with -o");
}

RunDirectory requested_directory(const std::string& requested) {
    const fs::path path = fs::absolute(requested).lexically_normal();
    std::error_code error;
    if (fs::exists(path, error)) {
        if (!fs::is_directory(path, error))
            throw LauncherError(fmt::format("-o {}: not a directory", requested));
        if (!fs::is_empty(path, error) || error)
            throw LauncherError(fmt::format(
                "-o {}: directory is not empty; traces of two runs would be reported as one", requested));
        return {path.string(), false};
    }
    if (path.has_parent_path())
        fs::create_directories(path.parent_path(), error);
    if (error || ::mkdir(path.c_str(), kDirectoryMode) != 0)
        throw LauncherError(fmt::format("-o {}: cannot create the directory: {}", requested,
                                        error ? error.message() : std::strerror(errno)));
    return {path.string(), true};
}

// Held from here on: what the launcher writes goes into the directory checked.
void open_and_check(RunDirectory& directory, const std::string& named) {
    directory.handle = FileDescriptor(::open(directory.path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    const char* distrust =
        directory.handle.get() < 0 ? std::strerror(errno) : directory_distrust(directory.handle.get());
    if (distrust == nullptr)
        return;
    remove_if_unused(directory);
    throw LauncherError(fmt::format("{}: the directory is {}: others could read, replace or remove the run's "
                                    "traces and report; name a directory of your own with -o",
                                    named, distrust));
}

} // namespace

RunDirectory make_run_directory(const std::string& requested, const std::string& command, std::time_t started,
                                const std::string& parent) {
    RunDirectory directory =
        requested.empty() ? fresh_directory(command, started, parent) : requested_directory(requested);
    open_and_check(directory, requested.empty() ? directory.path : "-o " + requested);
    return directory;
}

std::string machine_name() {
    char name[256] = {};
    return ::gethostname(name, sizeof name - 1) == 0 ? std::string(name) : std::string();
}

std::optional<JobPart> job_part(const std::vector<std::string>& command, const std::string& host,
                                const std::vector<std::string>& environment) {
    const std::string machine = safe_name(host, "host");
    const std::optional<int> tasks = count_of(variable(environment, "SLURM_NTASKS"));
    const std::optional<int> task = count_of(variable(environment, "SLURM_PROCID"));
    if (!variable(environment, "SLURM_STEP_ID").empty() && tasks.value_or(0) > 1 && task)
        return JobPart{fmt::format("{}.task{}", machine, *task)};
    const std::optional<std::vector<std::string>> torchrun = torchrun_arguments(command);
    if (!torchrun)
        return std::nullopt;
    const std::optional<std::string> node_rank = torchrun_option(*torchrun, {"--node-rank", "--node_rank"});
    const std::string nodes = torchrun_option(*torchrun, {"--nnodes"}).value_or("1");
    // "N", or "MIN:MAX" for an elastic job.
    const std::optional<int> most = count_of(nodes.substr(nodes.find(':') + 1));
    if (node_rank && count_of(*node_rank))
        return JobPart{fmt::format("{}.node{}", machine, *count_of(*node_rank))};
    if (most.value_or(1) > 1)
        return JobPart{machine};
    return std::nullopt;
}

RunDirectory make_job_run_directory(const std::string& requested, const JobPart& part) {
    const fs::path job = fs::absolute(requested).lexically_normal();
    std::error_code error;
    // The job's other launches may be making it at the same moment: one that exists is what is wanted.
    fs::create_directories(job, error);
    if (!fs::is_directory(job, error))
        throw LauncherError(fmt::format("-o {}: {}", requested,
                                        error ? "cannot create the directory: " + error.message()
                                              : std::string("not a directory")));
    RunDirectory job_directory{job.string(), false};
    open_and_check(job_directory, "-o " + requested);
    RunDirectory directory = first_free_directory(job / part.name, "");
    open_and_check(directory, "-o " + requested);
    return directory;
}

void remove_if_unused(const RunDirectory& directory) {
    if (directory.created)
        ::rmdir(directory.path.c_str()); // fails, as it should, when anything is in it
}

} // namespace gpuleak::launcher
