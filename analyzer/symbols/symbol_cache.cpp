#include "symbols/symbol_cache.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fmt/format.h>
#include <fstream>
#include <iterator>
#include <sys/stat.h>
#include <unistd.h>

namespace gpuleak::analyzer {

namespace {

// Raised whenever what DebugModule puts into a frame changes, so that older entries are not used.
constexpr std::string_view kMagic = "gpuleak frames 1\n";

// Bounds a damaged file cannot make the reader exceed.
constexpr uint32_t kMaxString = 1 << 20;
constexpr uint32_t kMaxFiles = 1024;
constexpr uint32_t kMaxEntries = 1 << 20;
constexpr uint32_t kMaxFramesPerEntry = 1024;
constexpr std::uintmax_t kMaxFileBytes = 512ull << 20;
// Every rebuild of a library brings a new build id: the directory keeps the modules written last.
constexpr size_t kMaxModules = 512;

constexpr uint8_t kInlined = 1;
constexpr uint8_t kSymbolized = 2;

struct FileState {
    bool present = false;
    uint64_t size = 0;
    int64_t modified_ns = 0;
    bool operator==(const FileState&) const = default;
};

FileState state_of(const std::string& path) {
    struct stat status {};
    if (::stat(path.c_str(), &status) != 0)
        return {};
    return {true, static_cast<uint64_t>(status.st_size),
            static_cast<int64_t>(status.st_mtim.tv_sec) * 1'000'000'000 + status.st_mtim.tv_nsec};
}

// The writer and the reader below are mirror images: keep them so.
class Writer {
  public:
    explicit Writer(std::string_view magic) : bytes_(magic) {}
    void integer(std::unsigned_integral auto value) {
        bytes_.append(reinterpret_cast<const char*>(&value), sizeof value);
    }
    void string(const std::string& text) {
        integer(static_cast<uint32_t>(text.size()));
        bytes_ += text;
    }
    void file(const std::string& path) {
        const FileState state = state_of(path);
        string(path);
        integer(static_cast<uint8_t>(state.present));
        integer(state.size);
        integer(static_cast<uint64_t>(state.modified_ns));
    }
    [[nodiscard]] const std::string& bytes() const { return bytes_; }

  private:
    std::string bytes_;
};

class Reader {
  public:
    explicit Reader(std::string_view bytes) : rest_(bytes) {}

    bool skip(std::string_view expected) {
        if (!rest_.starts_with(expected))
            return false;
        rest_.remove_prefix(expected.size());
        return true;
    }
    template <std::unsigned_integral T> bool integer(T& value) {
        if (rest_.size() < sizeof value)
            return false;
        std::memcpy(&value, rest_.data(), sizeof value);
        rest_.remove_prefix(sizeof value);
        return true;
    }
    bool string(std::string& text) {
        uint32_t size = 0;
        if (!integer(size) || size > kMaxString || rest_.size() < size)
            return false;
        text.assign(rest_.data(), size);
        rest_.remove_prefix(size);
        return true;
    }
    // False also when the file is no longer as the writer saw it.
    bool file_unchanged() {
        std::string path;
        uint8_t present = 0;
        uint64_t size = 0;
        uint64_t modified_ns = 0;
        if (!string(path) || !integer(present) || !integer(size) || !integer(modified_ns))
            return false;
        return state_of(path) == FileState{present != 0, size, static_cast<int64_t>(modified_ns)};
    }
    [[nodiscard]] bool done() const { return rest_.empty(); }

  private:
    std::string_view rest_;
};

std::string hex(const std::vector<uint8_t>& bytes) {
    std::string text;
    for (uint8_t byte : bytes)
        text += fmt::format("{:02x}", byte);
    return text;
}

// Removes the module files written longest ago beyond kMaxModules.
void prune(const std::filesystem::path& directory) {
    std::error_code error;
    std::vector<std::pair<std::filesystem::file_time_type, std::filesystem::path>> modules;
    for (const auto& entry : std::filesystem::directory_iterator(directory, error)) {
        if (entry.path().extension() != ".frames")
            continue;
        const auto written = entry.last_write_time(error);
        if (!error)
            modules.emplace_back(written, entry.path());
    }
    if (modules.size() <= kMaxModules)
        return;
    const auto oldest_kept = modules.end() - static_cast<std::ptrdiff_t>(kMaxModules);
    std::nth_element(modules.begin(), oldest_kept, modules.end());
    for (auto module = modules.begin(); module != oldest_kept; ++module)
        std::filesystem::remove(module->second, error);
}

std::optional<std::string> read_file(const std::string& path) {
    std::error_code error;
    const std::uintmax_t size = std::filesystem::file_size(path, error);
    if (error || size > kMaxFileBytes)
        return std::nullopt;
    std::ifstream in(path, std::ios::binary);
    std::string bytes{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
    if (!in && !in.eof())
        return std::nullopt;
    return bytes;
}

} // namespace

std::string default_symbol_cache_directory() {
    if (const char* directory = std::getenv("GPULEAK_CACHE_DIR");
        directory != nullptr && directory[0] != '\0')
        return directory;
    // The XDG base directory specification: relative values are to be ignored.
    if (const char* cache = std::getenv("XDG_CACHE_HOME"); cache != nullptr && cache[0] == '/')
        return std::string(cache) + "/gpuleak/symbols";
    if (const char* home = std::getenv("HOME"); home != nullptr && home[0] == '/')
        return std::string(home) + "/.cache/gpuleak/symbols";
    return {};
}

ModuleFrameCache::ModuleFrameCache(std::string directory, const std::vector<uint8_t>& build_id,
                                   const std::string& debuginfo_path, const std::string& module_file)
    : debuginfo_path_(debuginfo_path), module_file_(module_file) {
    if (directory.empty() || build_id.empty())
        return;
    file_ = fmt::format("{}/{}.frames", directory, hex(build_id));
    const std::optional<std::string> bytes = read_file(file_);
    if (!bytes)
        return;

    Reader reader(*bytes);
    std::string recorded_path;
    std::string recorded_module_file;
    uint32_t files = 0;
    if (!reader.skip(kMagic) || !reader.string(recorded_path) || recorded_path != debuginfo_path_ ||
        !reader.string(recorded_module_file) || recorded_module_file != module_file_ ||
        !reader.integer(files) || files > kMaxFiles)
        return;
    for (uint32_t i = 0; i < files; ++i) {
        if (!reader.file_unchanged())
            return;
    }
    uint32_t count = 0;
    if (!reader.integer(count) || count > kMaxEntries)
        return;
    std::unordered_map<uint64_t, Frames> entries;
    entries.reserve(count);
    for (uint32_t i = 0; i < count; ++i) {
        uint64_t offset = 0;
        uint32_t frame_count = 0;
        if (!reader.integer(offset) || !reader.integer(frame_count) || frame_count == 0 ||
            frame_count > kMaxFramesPerEntry)
            return;
        Frames& frames = entries[offset];
        frames.resize(frame_count);
        for (SourceFrame& frame : frames) {
            uint8_t flags = 0;
            if (!reader.string(frame.function) || !reader.string(frame.file) || !reader.integer(frame.line) ||
                !reader.integer(flags))
                return;
            frame.inlined = (flags & kInlined) != 0;
            frame.symbolized = (flags & kSymbolized) != 0;
        }
    }
    if (reader.done())
        entries_ = std::move(entries);
}

const ModuleFrameCache::Frames* ModuleFrameCache::find(uint64_t module_offset) const {
    auto found = entries_.find(module_offset);
    return found == entries_.end() ? nullptr : &found->second;
}

void ModuleFrameCache::add(uint64_t module_offset, const Frames& frames) {
    if (file_.empty() || frames.empty() || frames.size() > kMaxFramesPerEntry ||
        entries_.size() >= kMaxEntries)
        return;
    Frames& kept = entries_[module_offset];
    kept.clear();
    for (const SourceFrame& frame : frames) {
        SourceFrame& copy = kept.emplace_back();
        copy.function = frame.function;
        copy.file = frame.file;
        copy.line = frame.line;
        copy.inlined = frame.inlined;
        copy.symbolized = frame.symbolized;
    }
    added_ = true;
}

void ModuleFrameCache::save(const FrameSources& sources) const {
    if (!added_ || file_.empty() || sources.files.empty() || sources.files.size() > kMaxFiles)
        return;
    Writer writer(kMagic);
    writer.string(sources.debuginfo_path);
    writer.string(sources.module_file);
    writer.integer(static_cast<uint32_t>(sources.files.size()));
    for (const std::string& path : sources.files)
        writer.file(path);
    writer.integer(static_cast<uint32_t>(entries_.size()));
    for (const auto& [offset, frames] : entries_) {
        writer.integer(offset);
        writer.integer(static_cast<uint32_t>(frames.size()));
        for (const SourceFrame& frame : frames) {
            writer.string(frame.function);
            writer.string(frame.file);
            writer.integer(frame.line);
            writer.integer(
                static_cast<uint8_t>((frame.inlined ? kInlined : 0) | (frame.symbolized ? kSymbolized : 0)));
        }
    }
    const std::string& bytes = writer.bytes();

    std::error_code error;
    std::filesystem::create_directories(std::filesystem::path(file_).parent_path(), error);
    std::string temporary = file_ + ".XXXXXX";
    const int fd = ::mkstemp(temporary.data());
    if (fd < 0)
        return;
    size_t written = 0;
    while (written < bytes.size()) {
        const ssize_t n = ::write(fd, bytes.data() + written, bytes.size() - written);
        if (n <= 0)
            break;
        written += static_cast<size_t>(n);
    }
    const bool closed = ::close(fd) == 0;
    // Readers see the old file or the new one, never a part: another report may be reading it now.
    if (written != bytes.size() || !closed || std::rename(temporary.c_str(), file_.c_str()) != 0) {
        std::remove(temporary.c_str());
        return;
    }
    prune(std::filesystem::path(file_).parent_path());
}

} // namespace gpuleak::analyzer
