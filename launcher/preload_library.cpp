#include "launcher/preload_library.h"

#include <cstdlib>
#include <filesystem>
#include <fmt/format.h>
#include <system_error>

#include "launcher/launcher_error.h"

namespace gpuleak::launcher {

namespace fs = std::filesystem;

namespace {

constexpr const char* kLibraryName = "libgpuleak.so";
// ld.so splits LD_PRELOAD at either.
constexpr const char* kPreloadSeparators = ": ";

std::vector<std::string> preload_entries(const std::string& list) {
    std::vector<std::string> entries;
    size_t start = 0;
    while (start <= list.size()) {
        size_t end = list.find_first_of(kPreloadSeparators, start);
        if (end == std::string::npos)
            end = list.size();
        if (end > start)
            entries.push_back(list.substr(start, end - start));
        start = end + 1;
    }
    return entries;
}

// AddressSanitizer's runtime refuses to run unless it is the first library loaded after the program.
bool is_sanitizer_runtime(const std::string& entry) {
    const std::string name = fs::path(entry).filename().string();
    return name.rfind("libasan", 0) == 0 || name.rfind("libhwasan", 0) == 0 ||
           name.rfind("libclang_rt.asan", 0) == 0 || name.rfind("libclang_rt.hwasan", 0) == 0;
}

bool usable(const fs::path& path) {
    std::error_code error;
    return fs::is_regular_file(path, error);
}

std::string checked_for_preload(const fs::path& path) {
    std::string text = fs::absolute(path).lexically_normal().string();
    if (text.find_first_of(kPreloadSeparators) != std::string::npos)
        throw LauncherError(
            fmt::format("{}: LD_PRELOAD cannot hold a path with a space or a colon; set GPULEAK_LIBRARY to "
                        "a copy or link elsewhere",
                        text));
    return text;
}

} // namespace

std::vector<std::string> library_candidates(const std::string& executable) {
    const fs::path bin = fs::path(executable).parent_path();
    std::vector<std::string> candidates{
        (bin / ".." / "interpose" / kLibraryName).lexically_normal().string(),
        (bin / GPULEAK_LIBDIR_FROM_BINDIR / kLibraryName).lexically_normal().string(),
        (bin / ".." / "lib" / kLibraryName).lexically_normal().string(),
    };
    // The install's libdir may be plain lib: the same candidate twice says nothing more in the error.
    if (candidates[1] == candidates[2])
        candidates.pop_back();
    return candidates;
}

std::string find_preload_library() {
    if (const char* override_path = std::getenv("GPULEAK_LIBRARY");
        override_path != nullptr && override_path[0] != '\0') {
        if (!usable(override_path))
            throw LauncherError(fmt::format("GPULEAK_LIBRARY={}: no such file", override_path));
        return checked_for_preload(override_path);
    }
    std::error_code error;
    // The executable's real place, symbolic links resolved: a link to it in ~/bin still finds the library
    // beside the real file.
    const fs::path executable = fs::read_symlink("/proc/self/exe", error);
    if (error)
        throw LauncherError(fmt::format("cannot find {}: /proc/self/exe: {}; set GPULEAK_LIBRARY",
                                        kLibraryName, error.message()));
    const std::vector<std::string> candidates = library_candidates(executable.string());
    for (const std::string& candidate : candidates)
        if (usable(candidate))
            return checked_for_preload(candidate);
    throw LauncherError(fmt::format("cannot find {} (looked for {}); set GPULEAK_LIBRARY to its path",
                                    kLibraryName, fmt::join(candidates, ", ")));
}

std::string preload_list(const std::string& library, const std::string& existing) {
    // Ours before the others: the dynamic linker binds a symbol to its first definition in load order, so
    // the first preloaded library sees every call the program makes. gpuleak passes each call on to the
    // next definition (dlsym RTLD_NEXT), so libraries preloaded after it (profilers' hooks, other shims)
    // still get them; a library ahead of it that defines cudaMalloc itself without passing the call on (a
    // stand-in runtime, a memory-limiting shim) would hide the program's allocations from it.
    std::vector<std::string> first;
    std::vector<std::string> rest;
    for (const std::string& entry : preload_entries(existing)) {
        if (fs::path(entry).filename() == kLibraryName)
            continue;
        (is_sanitizer_runtime(entry) ? first : rest).push_back(entry);
    }
    first.push_back(library);
    first.insert(first.end(), rest.begin(), rest.end());
    return fmt::format("{}", fmt::join(first, ":"));
}

} // namespace gpuleak::launcher
