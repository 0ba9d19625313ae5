#include "launcher/torch_adapter.h"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <elfutils/libdwelf.h>
#include <fcntl.h>
#include <filesystem>
#include <fmt/format.h>
#include <fstream>
#include <iterator>
#include <libelf.h>
#include <regex>
#include <span>
#include <sys/file.h>
#include <system_error>
#include <unistd.h>

#include "common/file_descriptor.h"
#include "gpuleak/torch_adapter_path.h"
#include "launcher/captured_run.h"
#include "launcher/launcher_error.h"
#include "launcher/say.h"
#include "launcher/shared_files.h"

namespace gpuleak::launcher {

namespace fs = std::filesystem;

namespace {

// Where torch is, without importing it (which takes seconds): the interpreter's own import system
// decides, with the environment the command will have. Marked: a .pth file or sitecustomize may print
// lines of its own.
constexpr const char* kTorchMark = "gpuleak-torch-directory:";
constexpr const char* kTorchProbe =
    "import importlib.util\n"
    "spec = importlib.util.find_spec('torch')\n"
    "locations = spec.submodule_search_locations if spec else None\n"
    "print('gpuleak-torch-directory:' + (locations[0] if locations else ''))\n";
constexpr std::chrono::seconds kProbeLimit{60};
// Importing torch from a cold network file system, then compiling against its headers.
constexpr std::chrono::seconds kBuildLimit{600};
// What Linux reads of a #! line (BINPRM_BUF_SIZE).
constexpr size_t kInterpreterLineLimit = 256;

bool is_python_name(const std::string& name) {
    static const std::regex python(R"(python(\d+(\.\d+)?[a-z]?)?)");
    return std::regex_match(name, python);
}

std::vector<std::string> words_of(const std::string& text) {
    std::vector<std::string> words;
    size_t start = 0;
    while ((start = text.find_first_not_of(" \t", start)) != std::string::npos) {
        const size_t end = text.find_first_of(" \t", start);
        words.push_back(text.substr(start, end - start));
        start = end;
    }
    return words;
}

// The interpreter `program`'s #! line runs it with, if it names a Python one. As Linux reads it: the
// interpreter, then the rest of the line as one argument, which env splits only after -S.
std::optional<std::string> interpreter_of(const std::string& program) {
    std::ifstream file(program, std::ios::binary);
    char bytes[kInterpreterLineLimit];
    file.read(bytes, sizeof bytes);
    const std::string head(bytes, static_cast<size_t>(file.gcount()));
    if (!head.starts_with("#!"))
        return std::nullopt;
    const std::string line = head.substr(2, head.find('\n') - 2);
    const size_t interpreter_start = line.find_first_not_of(" \t");
    if (interpreter_start == std::string::npos)
        return std::nullopt;
    const size_t interpreter_end = line.find_first_of(" \t", interpreter_start);
    const std::string interpreter = line.substr(interpreter_start, interpreter_end - interpreter_start);
    std::string argument;
    if (interpreter_end != std::string::npos &&
        line.find_first_not_of(" \t\r", interpreter_end) != std::string::npos) {
        argument = line.substr(line.find_first_not_of(" \t", interpreter_end));
        argument.erase(argument.find_last_not_of(" \t\r") + 1);
    }
    if (fs::path(interpreter).filename() != "env")
        return is_python_name(fs::path(interpreter).filename()) ? std::optional(interpreter) : std::nullopt;
    // `#!/usr/bin/env python3`; `#!/usr/bin/env -S python3 -u`, `-S VAR=1 python3`: the first word after
    // -S that is neither an option nor an assignment.
    std::string named = argument;
    if (argument.starts_with("-S")) {
        named.clear();
        for (const std::string& word : words_of(argument.substr(2))) {
            if (word.starts_with("-") || word.find('=') != std::string::npos)
                continue;
            named = word;
            break;
        }
    }
    if (named.empty() || named.find_first_of(" \t") != std::string::npos ||
        !is_python_name(fs::path(named).filename()))
        return std::nullopt;
    return find_program(named);
}

std::string build_id_of(const std::string& library) {
    FileDescriptor file(::open(library.c_str(), O_RDONLY | O_CLOEXEC));
    if (file.get() < 0)
        throw LauncherError(fmt::format("cannot open {}: {}", library, std::strerror(errno)));
    elf_version(EV_CURRENT);
    Elf* elf = elf_begin(file.get(), ELF_C_READ_MMAP, nullptr);
    const void* bytes = nullptr;
    const ssize_t length = elf != nullptr ? dwelf_elf_gnu_build_id(elf, &bytes) : -1;
    std::string hex;
    if (length > 0)
        hex = fmt::format(
            "{:02x}",
            fmt::join(std::span(static_cast<const uint8_t*>(bytes), static_cast<size_t>(length)), ""));
    if (elf != nullptr)
        elf_end(elf);
    if (hex.empty())
        throw LauncherError(
            fmt::format("{} has no GNU build id: gpuleak cannot tell which PyTorch it is", library));
    return hex;
}

std::string last_line_of(const std::string& file) {
    std::ifstream stream(file);
    std::string line;
    std::string last;
    while (std::getline(stream, line))
        if (line.find_first_not_of(" \t\r") != std::string::npos)
            last = line;
    return last;
}

// Whether the library the command will preload is this launcher's build (GPULEAK_LIBRARY may name
// another): its adapter's name is in its read-only data.
bool loads_this_adapter(const std::string& library) {
    std::ifstream file(library, std::ios::binary);
    const std::string bytes((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
    return bytes.find(kTorchAdapterLibrary) != std::string::npos;
}

// Holds an exclusive lock on `path` (created if missing) while it lives: the launchers of a
// hyperparameter search started at once build the adapter once. Read-only suffices for flock, so a
// lock file another user made in a shared cache serves too. A file system may have no such locks
// (Lustre mounted without flock, some NFS servers): then none is held.
class BuildLock {
  public:
    explicit BuildLock(const std::string& path)
        : file_(::open(path.c_str(), O_RDONLY | O_CREAT | O_CLOEXEC, 0644)) {
        if (file_.get() < 0)
            return;
        int locked = -1;
        while ((locked = ::flock(file_.get(), LOCK_EX)) != 0 && errno == EINTR) {
        }
        held_ = locked == 0;
    }

    [[nodiscard]] bool held() const { return held_; }

  private:
    FileDescriptor file_;
    bool held_ = false;
};

void record_failure(AdapterBuild& build, const std::string& why) {
    build.failure = last_line_of(build.log);
    if (build.failure.empty()) {
        // The log that libgpuleak.so's warning names says something all the same.
        build.failure = why;
        std::ofstream(build.log, std::ios::app) << why << '\n';
    }
}

} // namespace

std::optional<std::string> python_of_command(const std::vector<std::string>& command) {
    if (command.empty())
        return std::nullopt;
    if (is_python_name(fs::path(command[0]).filename()))
        return find_program(command[0]);
    const std::optional<std::string> program = find_program(command[0]);
    if (!program)
        return std::nullopt;
    return interpreter_of(*program);
}

std::optional<TorchInstall> torch_of(const std::string& python) {
    const CapturedRun probe = run_captured({python, "-c", kTorchProbe}, "/dev/null", kProbeLimit);
    const size_t mark = probe.output.rfind(kTorchMark);
    if (!probe.succeeded() || mark == std::string::npos)
        return std::nullopt;
    const size_t start = mark + std::strlen(kTorchMark);
    std::string directory = probe.output.substr(start, probe.output.find('\n', start) - start);
    if (directory.empty())
        return std::nullopt;
    const std::string library = directory + "/lib/libc10_cuda.so";
    std::error_code error;
    if (!fs::is_regular_file(library, error))
        return std::nullopt;
    char version[128];
    if (!read_torch_version((directory + "/version.py").c_str(), version, sizeof version))
        throw LauncherError(fmt::format("cannot read torch's version from {}/version.py", directory));
    return TorchInstall{std::move(directory), version, build_id_of(library)};
}

AdapterBuild ensure_torch_adapter(const std::string& python, const TorchInstall& torch, bool announce) {
    char directory[4096];
    if (!torch_adapter_directory(torch.version.c_str(), torch.build_id.c_str(), directory, sizeof directory))
        throw LauncherError("no cache directory for the PyTorch adapter: set GPULEAK_TORCH_ADAPTER_DIR");
    AdapterBuild build{fmt::format("{}/{}", directory, kTorchAdapterLibrary),
                       fmt::format("{}/{}", directory, kTorchAdapterBuildLog), false, ""};
    std::error_code error;
    if (fs::is_regular_file(build.library, error)) {
        build.built = true;
        return build;
    }
    std::string why;
    const std::optional<std::string> sources = find_shared("torch_adapter", "build-adapter.sh", why);
    if (!sources)
        throw LauncherError(fmt::format("cannot find the PyTorch adapter's source ({})", why));
    fs::create_directories(directory, error);
    if (error)
        throw LauncherError(fmt::format("cannot create {}: {}", directory, error.message()));
    const auto waited_from = fs::file_time_type::clock::now();
    const BuildLock lock(fmt::format("{}/.build.lock", directory));
    if (fs::is_regular_file(build.library, error)) {
        build.built = true;
        return build;
    }
    // A launcher that held the lock meanwhile tried and failed: its answer is this one's too. Without the
    // lock another may be building now, writing that log: this one builds beside it (build-adapter.sh
    // renames its library into place whole).
    if (const auto written = fs::last_write_time(build.log, error);
        lock.held() && !error && written >= waited_from) {
        record_failure(build, "the build failed");
        return build;
    }
    if (announce)
        say(fmt::format(
            "building gpuleak's PyTorch adapter for torch {} (kept for later runs), so that each tensor "
            "is recorded",
            torch.version));
    const CapturedRun run =
        run_captured({"bash", *sources + "/build-adapter.sh", python}, build.log, kBuildLimit);
    const std::string printed = run.output.substr(0, run.output.find('\n'));
    if (run.succeeded() && printed == build.library && fs::is_regular_file(build.library, error)) {
        fs::remove(build.log, error);
        build.built = true;
        return build;
    }
    if (run.succeeded()) {
        // The script names its library with the hash of the source it compiled: another gpuleak's.
        std::ofstream(build.log, std::ios::app) << fmt::format(
            "build-adapter.sh built {}, not {}: it is not this gpuleak's\n", printed, build.library);
    }
    record_failure(build, run.timed_out ? fmt::format("build-adapter.sh took over {} s and was stopped",
                                                      kBuildLimit.count())
                          : run.exited  ? fmt::format("build-adapter.sh exited with {}", run.exit_status)
                                        : "build-adapter.sh was killed");
    return build;
}

std::optional<AdapterBuild> prepare_torch_adapter(const std::optional<std::string>& python,
                                                  const std::string& library, bool announce) {
    const char* wanted = std::getenv("GPULEAK_TORCH");
    if (!python || (wanted != nullptr && std::strcmp(wanted, "0") == 0) || !loads_this_adapter(library))
        return std::nullopt;
    try {
        if (const std::optional<TorchInstall> torch = torch_of(*python))
            return ensure_torch_adapter(*python, *torch, announce);
    } catch (const LauncherError&) {
        // libgpuleak.so's warning in the traced process says what it records instead.
    } catch (const fs::filesystem_error&) {
    }
    return std::nullopt;
}

int torch_adapter_command(const std::string& python) {
    const std::optional<TorchInstall> torch = torch_of(python);
    if (!torch)
        throw LauncherError(fmt::format(
            "torch-adapter: {} imports no torch with CUDA (no torch/lib/libc10_cuda.so)", python));
    const AdapterBuild build = ensure_torch_adapter(python, *torch, true);
    if (!build.built)
        throw LauncherError(
            fmt::format("torch-adapter: cannot build the PyTorch adapter for torch {}: {} (the "
                        "build's output: {})",
                        torch->version, build.failure, build.log));
    fmt::print("{}\n", build.library);
    return 0;
}

} // namespace gpuleak::launcher
