#include "launcher/kernelspec.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <fmt/format.h>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sys/stat.h>
#include <system_error>

#include "common/file_bytes.h"
#include "common/file_descriptor.h"
#include "launcher/interpreter_probe.h"
#include "launcher/launcher_error.h"

namespace gpuleak::launcher {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

std::string environment_or(const char* name, const std::string& fallback) {
    const char* value = std::getenv(name);
    return value != nullptr && value[0] != '\0' ? std::string(value) : fallback;
}

std::string user_data_directory() {
    const std::string home = environment_or("HOME", "/");
    const std::string xdg = environment_or("XDG_DATA_HOME", (fs::path(home) / ".local" / "share").string());
    return environment_or("JUPYTER_DATA_DIR", (fs::path(xdg) / "jupyter").string());
}

// Jupyter's own rule for kernel names (jupyter_client.kernelspec._is_valid_kernel_name).
bool valid_name(const std::string& name) {
    if (name.empty())
        return false;
    for (const char c : name)
        if (!(std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '.' || c == '_' || c == '-'))
            return false;
    return true;
}

std::string launcher_executable() {
    std::error_code error;
    const fs::path executable = fs::read_symlink("/proc/self/exe", error);
    if (error)
        throw LauncherError(
            fmt::format("cannot name gpuleak in the kernelspec: /proc/self/exe: {}", error.message()));
    return executable.string();
}

bool is_gpuleak_argv(const json& argv) {
    return argv.is_array() && argv.size() >= 3 && argv[0].is_string() && argv[1] == "kernel" &&
           argv[2] == "run" && fs::path(argv[0].get<std::string>()).filename() == "gpuleak";
}

// A team's prefix may be writable by its group, whose members install kernels there alike; a directory
// that anyone may write to, without the sticky bit, would let anyone replace the kernel.json that Jupyter
// runs as whoever starts the kernel.
void check_spec_level(const FileDescriptor& held, const fs::path& level) {
    struct stat status {};
    if (held.get() < 0 || ::fstat(held.get(), &status) != 0)
        throw LauncherError(fmt::format("cannot open {}: {}", level.string(),
                                        errno == ELOOP || errno == ENOTDIR ? "a symbolic link or a file"
                                                                           : std::strerror(errno)));
    if ((status.st_mode & S_IWOTH) != 0 && (status.st_mode & S_ISVTX) == 0)
        throw LauncherError(fmt::format("{}: anyone may write to this directory, and replace the kernel's "
                                        "kernel.json with a command of theirs; make it writable by its owner "
                                        "(and group) only",
                                        level.string()));
}

// The kernel's spec directory, `kernels/<name>`, opened through its parent without following a link
// at it, each checked.
FileDescriptor open_spec_directory(const fs::path& directory) {
    const FileDescriptor kernels(::open(directory.parent_path().c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    check_spec_level(kernels, directory.parent_path());
    FileDescriptor spec(::openat(kernels.get(), directory.filename().c_str(),
                                 O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    check_spec_level(spec, directory);
    return spec;
}

} // namespace

std::string data_directory(SpecPlace place, const std::string& prefix, const std::string& sys_prefix) {
    switch (place) {
    case SpecPlace::User:
        return user_data_directory();
    case SpecPlace::SysPrefix:
        return (fs::path(sys_prefix) / "share" / "jupyter").string();
    case SpecPlace::Prefix:
        return (fs::absolute(prefix) / "share" / "jupyter").lexically_normal().string();
    case SpecPlace::System:
        break;
    }
    return "/usr/local/share/jupyter";
}

std::string kernel_json(const std::string& launcher, const std::string& python,
                        const std::string& display_name) {
    const json spec = {
        // ipykernel's own argv, after the launcher's: --ext loads the extension that marks and names the
        // cells (IPython's InteractiveShellApp.extra_extensions).
        {"argv",
         {launcher, "kernel", "run", "--", python, "-m", "ipykernel_launcher", "--ext", "gpuleak", "-f",
          "{connection_file}"}},
        {"display_name", display_name},
        {"language", "python"},
        // Jupyter signals the launcher's process group, which the kernel is in: an interrupt reaches it.
        {"interrupt_mode", "signal"},
        {"metadata", {{"debugger", true}}},
    };
    return spec.dump(1) + "\n";
}

std::string install_kernelspec(const KernelInstallRequest& request) {
    if (!valid_name(request.name))
        throw LauncherError(fmt::format("--name {}: a kernel name may hold only letters, digits, '.', '_' "
                                        "and '-'",
                                        request.name));
    const Interpreter interpreter = probe_interpreter(request.python);
    if (!interpreter.has_ipykernel)
        throw LauncherError(fmt::format("--python {}: {} has no ipykernel; install it with {} -m pip install "
                                        "ipykernel",
                                        request.python, interpreter.executable, interpreter.executable));
    const fs::path directory = fs::path(data_directory(request.place, request.prefix, interpreter.prefix)) /
                               "kernels" / request.name;
    std::error_code error;
    if (fs::exists(directory / "kernel.json", error) && !request.replace)
        throw LauncherError(fmt::format("{} exists already; --replace replaces it", directory.string()));
    fs::create_directories(directory, error);
    if (error)
        throw LauncherError(fmt::format("cannot create {}: {}", directory.string(), error.message()));
    const FileDescriptor held = open_spec_directory(directory);
    const fs::path file = directory / "kernel.json";
    // Readable by Jupyter, which may run as another user on a shared prefix.
    const std::string text = kernel_json(launcher_executable(), interpreter.executable, request.display_name);
    if (const int failure = write_regular_file_at(held.get(), "kernel.json", text.data(), text.size(), 0644);
        failure != 0)
        throw LauncherError(fmt::format("cannot write {}: {}", file.string(), write_failure_text(failure)));
    return directory.string();
}

std::vector<std::string> kernelspec_search_path(const std::string& sys_prefix) {
    std::vector<std::string> data;
    const std::string jupyter_path = environment_or("JUPYTER_PATH", "");
    for (size_t start = 0; start < jupyter_path.size();) {
        size_t end = jupyter_path.find(':', start);
        if (end == std::string::npos)
            end = jupyter_path.size();
        if (end > start)
            data.push_back(jupyter_path.substr(start, end - start));
        start = end + 1;
    }
    data.push_back(user_data_directory());
    if (!sys_prefix.empty())
        data.push_back((fs::path(sys_prefix) / "share" / "jupyter").string());
    data.emplace_back("/usr/local/share/jupyter");
    data.emplace_back("/usr/share/jupyter");
    std::vector<std::string> kernels;
    for (const std::string& directory : data) {
        const std::string path = (fs::path(directory) / "kernels").lexically_normal().string();
        if (std::find(kernels.begin(), kernels.end(), path) == kernels.end())
            kernels.push_back(path);
    }
    return kernels;
}

std::vector<FoundSpec> find_gpuleak_kernelspecs(const std::vector<std::string>& search_path) {
    std::vector<FoundSpec> found;
    for (const std::string& kernels : search_path) {
        std::error_code error;
        std::vector<fs::path> directories;
        for (fs::directory_iterator entry(kernels, error), end; !error && entry != end;
             entry.increment(error))
            directories.push_back(entry->path());
        // By name, as `jupyter kernelspec list` shows them, not in the file system's order.
        std::sort(directories.begin(), directories.end());
        for (const fs::path& directory : directories) {
            std::ifstream in(directory / "kernel.json");
            const json spec = json::parse(in, nullptr, false);
            if (spec.is_discarded() || !spec.is_object() || !is_gpuleak_argv(spec.value("argv", json())))
                continue;
            const json display = spec.value("display_name", json());
            found.push_back({directory.filename().string(),
                             display.is_string() ? display.get<std::string>() : "", directory.string()});
        }
    }
    return found;
}

} // namespace gpuleak::launcher
