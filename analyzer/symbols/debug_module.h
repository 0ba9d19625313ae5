// One module of a trace opened with elfutils' libdwfl at the address it was loaded at, for turning code
// addresses in it into source frames.
//
// The file must be the one the trace recorded: when the recorded path is missing or now holds another
// build (other build id), a file with the recorded build id is looked for in the debug directories
// (".build-id/xx/yyyy", ".build-id/xx/yyyy.debug"); failing that the module is not used, since a
// rebuilt library would give plausible but wrong names. Separate debug info for the file is found by
// libdwfl's standard search (build id first, then .gnu_debuglink) and, when DEBUGINFOD_URLS is set,
// by debuginfod.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include <elfutils/libdwfl.h>

#include "read/trace_reader.h"
#include "symbols/source_frame.h"
#include "symbols/symbol_table.h"
#include "symbols/unit_scopes.h"

namespace gpuleak::analyzer {

class DebugModule {
  public:
    enum class State {
        Usable,
        Stale, // the recorded path holds another build, and no file with the recorded build id was found
        Unavailable, // missing, not absolute (the vdso), not a regular file, or not an ELF file
    };

    // `debuginfo_path` in elfutils' syntax (see dwfl_standard_find_debuginfo); empty for its default.
    DebugModule(const Module& module, const std::string& debuginfo_path);
    ~DebugModule();
    DebugModule(const DebugModule&) = delete;
    DebugModule& operator=(const DebugModule&) = delete;

    [[nodiscard]] State state() const { return state_; }
    // Why the module is not usable, in words.
    [[nodiscard]] const std::string& problem() const { return problem_; }

    // The frames at the instruction at `address` (a run-time address inside the module), innermost
    // first: the inlined calls that contain it, then the function they were inlined into. Fills in
    // function, file, line, inlined and symbolized; at least one frame. Requires state() == Usable.
    std::vector<SourceFrame> frames_at(uint64_t address);

    // Does now the costly part of the first frames_at, whatever the address: reads the DWARF, finding
    // and decompressing separate debug info, or, for a module without any, the symbol table it is then
    // named from. Requires state() == Usable.
    void read_debug_info();

    // The file opened for the module: its recorded path, or a file with its build id. Requires
    // state() == Usable.
    [[nodiscard]] const std::string& file() const { return file_; }
    // The files whose contents or absence the frames depend on (the module's file, the file its DWARF
    // is in, the build-id places a separate debug file is looked for first), for telling later whether
    // frames kept from this module still hold; empty when the module has no DWARF, whose frames come
    // from its symbol table alone and are cheap to find again. Reads the debug info.
    std::vector<std::string> frame_sources();

  private:
    // Reports `file` to a fresh libdwfl session, as module_; on failure says why in open_error_.
    bool open(const std::string& file, uint64_t load_address);
    void close();
    const UnitScopes& scopes_of(Dwarf_Die* unit);
    // Demangled once per function: every address in it needs the name again.
    const std::string& function_name(Dwarf_Die* scope);
    const std::string& symbol_name(uint64_t address);

    std::string debuginfo_path_;
    std::string file_;
    char* debuginfo_path_pointer_ = nullptr; // what callbacks_ points to: libdwfl wants a char**
    Dwfl_Callbacks callbacks_{};
    Dwfl* dwfl_ = nullptr;
    Dwfl_Module* module_ = nullptr;
    State state_ = State::Unavailable;
    std::string problem_;
    std::string open_error_;
    // Built when first needed, from DWARF and ELF data that stay mapped while dwfl_ is open.
    std::unordered_map<Dwarf_Off, UnitScopes> units_; // by the unit's DIE offset
    std::unique_ptr<SymbolTable> symbols_;
    std::unordered_map<const void*, std::string> names_; // by the DIE's or the symbol name's address
};

} // namespace gpuleak::analyzer
