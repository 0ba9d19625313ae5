#include "common/cgroup_paths.h"

#include <cstdio>
#include <string_view>

namespace gpuleak {

namespace {

// `root` + `hierarchy` + the path, without the path's trailing "/" (the top directory is "/").
void join(char (&out)[512], const char* root, const char* hierarchy, std::string_view path) {
    if (!path.empty() && path.back() == '/')
        path.remove_suffix(1);
    const int written = std::snprintf(out, sizeof out, "%s%s%.*s", root, hierarchy,
                                      static_cast<int>(path.size()), path.data());
    if (written < 0 || static_cast<size_t>(written) >= sizeof out)
        out[0] = '\0';
}

bool has_memory_controller(std::string_view controllers) {
    while (!controllers.empty()) {
        const size_t comma = controllers.find(',');
        if (controllers.substr(0, comma) == "memory")
            return true;
        controllers = comma == std::string_view::npos ? std::string_view() : controllers.substr(comma + 1);
    }
    return false;
}

} // namespace

void memory_cgroup_directories(const char* proc_self_cgroup, const char* root,
                               CgroupDirectories& directories) {
    directories.v2[0] = '\0';
    directories.v1[0] = '\0';
    std::string_view text(proc_self_cgroup);
    while (!text.empty()) {
        const size_t end = text.find('\n');
        const std::string_view line = text.substr(0, end);
        text = end == std::string_view::npos ? std::string_view() : text.substr(end + 1);
        const size_t first = line.find(':');
        const size_t second = first == std::string_view::npos ? first : line.find(':', first + 1);
        if (second == std::string_view::npos)
            continue;
        const std::string_view path = line.substr(second + 1);
        if (line.substr(0, second + 1) == "0::")
            join(directories.v2, root, "", path);
        else if (has_memory_controller(line.substr(first + 1, second - first - 1)))
            join(directories.v1, root, "/memory", path);
    }
}

} // namespace gpuleak
