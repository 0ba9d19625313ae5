#include "symbols/debug_module.h"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <cxxabi.h>
#include <dwarf.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <memory>
#include <sys/stat.h>
#include <unistd.h>

#include <elfutils/libdw.h>

namespace gpuleak::analyzer {

namespace {

// elfutils' own default (libdwfl's DEFAULT_DEBUGINFO_PATH), needed here to search it by build id too.
constexpr const char* kDefaultDebuginfoPath = ":.debug:/usr/lib/debug";

// The absolute directories of a debuginfo path: the ones elfutils searches by build id.
std::vector<std::string> build_id_directories(const std::string& debuginfo_path) {
    std::vector<std::string> directories;
    const std::string path = debuginfo_path.empty() ? kDefaultDebuginfoPath : debuginfo_path;
    size_t start = 0;
    while (start <= path.size()) {
        size_t end = std::min(path.find(':', start), path.size());
        std::string element = path.substr(start, end - start);
        // A leading + or - switches CRC checking for the element; it is not part of the directory.
        if (!element.empty() && (element[0] == '+' || element[0] == '-'))
            element.erase(0, 1);
        if (element.starts_with('/'))
            directories.push_back(element);
        start = end + 1;
    }
    return directories;
}

// Files that have the build id, by the .build-id convention: the object itself, then its debug file
// (which keeps the program headers and symbol table, so it can stand in for the object).
std::vector<std::string> files_with_build_id(const std::vector<uint8_t>& build_id,
                                             const std::string& debuginfo_path) {
    std::vector<std::string> files;
    if (build_id.size() < 2)
        return files;
    std::string rest;
    for (size_t i = 1; i < build_id.size(); ++i)
        rest += fmt::format("{:02x}", build_id[i]);
    for (const std::string& directory : build_id_directories(debuginfo_path)) {
        const std::string stem = fmt::format("{}/.build-id/{:02x}/{}", directory, build_id[0], rest);
        files.push_back(stem);
        files.push_back(stem + ".debug");
    }
    return files;
}

// The trace keeps at most this many bytes of a build id.
constexpr size_t kRecordedBuildIdBytes = sizeof(format::ModuleRecord::build_id);

bool same_build(Dwfl_Module* module, const std::vector<uint8_t>& recorded) {
    const unsigned char* bits = nullptr;
    GElf_Addr vaddr = 0;
    const int length = dwfl_module_build_id(module, &bits, &vaddr);
    if (length <= 0)
        return false;
    const auto kept = std::min(static_cast<size_t>(length), kRecordedBuildIdBytes);
    return recorded.size() == kept && std::equal(recorded.begin(), recorded.end(), bits);
}

std::string demangle(const char* name) {
    // Only mangled names: __cxa_demangle also decodes type encodings, and would turn a C function "f"
    // into "float".
    if (std::strncmp(name, "_Z", 2) != 0)
        return name;
    int status = 0;
    std::unique_ptr<char, decltype(&std::free)> demangled(
        abi::__cxa_demangle(name, nullptr, nullptr, &status), &std::free);
    return status == 0 && demangled != nullptr ? std::string(demangled.get()) : std::string(name);
}

// The file and line in the caller that `inlined` was called from.
void call_site(Dwarf_Die* inlined, SourceFrame& caller) {
    Dwarf_Attribute attribute;
    Dwarf_Word line = 0;
    if (dwarf_formudata(dwarf_attr(inlined, DW_AT_call_line, &attribute), &line) == 0)
        caller.line = static_cast<uint32_t>(line);
    Dwarf_Word file = 0;
    Dwarf_Die unit;
    Dwarf_Files* files = nullptr;
    size_t count = 0;
    if (dwarf_formudata(dwarf_attr(inlined, DW_AT_call_file, &attribute), &file) == 0 &&
        dwarf_diecu(inlined, &unit, nullptr, nullptr) != nullptr &&
        dwarf_getsrcfiles(&unit, &files, &count) == 0 && file < count) {
        if (const char* name = dwarf_filesrc(files, file, nullptr, nullptr))
            caller.file = name;
    }
}

} // namespace

DebugModule::DebugModule(const Module& module, const std::string& debuginfo_path)
    : debuginfo_path_(debuginfo_path) {
    debuginfo_path_pointer_ = debuginfo_path_.empty() ? nullptr : debuginfo_path_.data();
    callbacks_.find_elf = dwfl_build_id_find_elf;
    callbacks_.find_debuginfo = dwfl_standard_find_debuginfo;
    callbacks_.section_address = dwfl_offline_section_address;
    callbacks_.debuginfo_path = &debuginfo_path_pointer_;

    // A name without a slash (the vdso, "linux-vdso.so.1") is no file: opening it would look in the
    // analyzer's working directory.
    if (!module.path.starts_with('/')) {
        problem_ = "not a file path";
    } else if (!open(module.path, module.load_address)) {
        problem_ = open_error_;
    } else if (module.build_id.empty() || same_build(module_, module.build_id)) {
        // Without a recorded build id there is nothing to check against: the file is taken as it is.
        state_ = State::Usable;
        return;
    } else {
        close();
        state_ = State::Stale;
        problem_ = "its build id differs from the recorded one: the file was rebuilt or replaced since";
    }
    for (const std::string& file : files_with_build_id(module.build_id, debuginfo_path_)) {
        if (!open(file, module.load_address))
            continue;
        if (same_build(module_, module.build_id)) {
            state_ = State::Usable;
            problem_.clear();
            return;
        }
        close();
    }
}

DebugModule::~DebugModule() {
    close();
}

bool DebugModule::open(const std::string& file, uint64_t load_address) {
    // Opened here rather than by libdwfl so that a path in a damaged or hostile trace that names a
    // FIFO or a device can neither block the analyzer nor feed it endless bytes.
    const int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) {
        open_error_ = std::strerror(errno);
        return false;
    }
    struct stat status {};
    if (::fstat(fd, &status) != 0 || !S_ISREG(status.st_mode)) {
        ::close(fd);
        open_error_ = "not a regular file";
        return false;
    }
    dwfl_ = dwfl_begin(&callbacks_);
    // At the recorded load address (dlpi_addr, the bias), so that run-time addresses look up directly.
    module_ = dwfl_ != nullptr ? dwfl_report_elf(dwfl_, file.c_str(), file.c_str(), fd, load_address,
                                                 /*add_p_vaddr=*/true)
                               : nullptr;
    if (module_ == nullptr) {
        open_error_ = dwfl_errmsg(-1);
        ::close(fd); // dwfl_report_elf takes the descriptor only when it succeeds
        close();
        return false;
    }
    dwfl_report_end(dwfl_, nullptr, nullptr);
    file_ = file;
    return true;
}

void DebugModule::close() {
    if (dwfl_ != nullptr)
        dwfl_end(dwfl_);
    dwfl_ = nullptr;
    module_ = nullptr;
}

std::vector<SourceFrame> DebugModule::frames_at(uint64_t address) {
    Dwarf_Addr bias = 0;
    Dwarf_Die* unit = dwfl_module_addrdie(module_, address, &bias);
    std::vector<Dwarf_Die> scopes =
        unit != nullptr ? scopes_of(unit).at(address - bias) : std::vector<Dwarf_Die>();
    std::vector<SourceFrame> frames(std::max<size_t>(scopes.size(), 1));
    for (size_t i = 0; i < scopes.size(); ++i) {
        frames[i].function = function_name(&scopes[i]);
        frames[i].inlined = i + 1 < scopes.size();
        if (frames[i].inlined)
            call_site(&scopes[i], frames[i + 1]);
    }
    // The symbol table names code without debug info, and functions whose DWARF leaves out the name.
    if (frames.back().function.empty())
        frames.back().function = symbol_name(address);
    // The line table describes the innermost frame; each outer one is where its callee was inlined.
    if (Dwfl_Line* line = dwfl_module_getsrc(module_, address)) {
        int number = 0;
        if (const char* file = dwfl_lineinfo(line, nullptr, &number, nullptr, nullptr, nullptr)) {
            frames.front().file = file;
            frames.front().line = number > 0 ? static_cast<uint32_t>(number) : 0;
        }
    }
    for (SourceFrame& frame : frames)
        frame.symbolized = !frame.function.empty();
    return frames;
}

void DebugModule::read_debug_info() {
    Dwarf_Addr bias = 0;
    if (dwfl_module_getdwarf(module_, &bias) == nullptr && symbols_ == nullptr)
        symbols_ = std::make_unique<SymbolTable>(module_);
}

std::vector<std::string> DebugModule::frame_sources() {
    Dwarf_Addr bias = 0;
    if (dwfl_module_getdwarf(module_, &bias) == nullptr)
        return {};
    std::vector<std::string> files{file_};
    const char* debug_file = nullptr;
    dwfl_module_info(module_, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, &debug_file);
    // libdwfl looks for a separate debug file only when the module's own file has no DWARF, and then
    // by build id first: a debug file installed there later would be chosen over the one used now.
    if (debug_file != nullptr && file_ != debug_file) {
        files.emplace_back(debug_file);
        const unsigned char* bits = nullptr;
        GElf_Addr vaddr = 0;
        const int length = dwfl_module_build_id(module_, &bits, &vaddr);
        if (length > 0) {
            for (const std::string& candidate :
                 files_with_build_id(std::vector<uint8_t>(bits, bits + length), debuginfo_path_)) {
                if (candidate.ends_with(".debug"))
                    files.push_back(candidate);
            }
        }
    }
    return files;
}

const UnitScopes& DebugModule::scopes_of(Dwarf_Die* unit) {
    auto found = units_.find(dwarf_dieoffset(unit));
    if (found == units_.end())
        found = units_.emplace(dwarf_dieoffset(unit), UnitScopes(unit)).first;
    return found->second;
}

// The linkage name carries the namespaces, classes and parameters that DW_AT_name lacks; an inlined
// instance has its names in its abstract origin, which dwarf_attr_integrate follows.
const std::string& DebugModule::function_name(Dwarf_Die* scope) {
    auto [name, added] = names_.try_emplace(scope->addr);
    if (added) {
        Dwarf_Attribute attribute;
        const char* linkage = dwarf_formstring(dwarf_attr_integrate(scope, DW_AT_linkage_name, &attribute));
        if (linkage == nullptr)
            linkage = dwarf_formstring(dwarf_attr_integrate(scope, DW_AT_MIPS_linkage_name, &attribute));
        const char* plain = dwarf_formstring(dwarf_attr_integrate(scope, DW_AT_name, &attribute));
        name->second = linkage != nullptr ? demangle(linkage) : plain != nullptr ? plain : "";
    }
    return name->second;
}

const std::string& DebugModule::symbol_name(uint64_t address) {
    if (symbols_ == nullptr)
        symbols_ = std::make_unique<SymbolTable>(module_);
    static const std::string kNone;
    const char* symbol = symbols_->at(address);
    if (symbol == nullptr)
        return kNone;
    auto [name, added] = names_.try_emplace(symbol);
    if (added)
        name->second = demangle(symbol);
    return name->second;
}

} // namespace gpuleak::analyzer
