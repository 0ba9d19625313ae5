// Turns the return addresses of a trace's native stacks into functions (demangled), files and lines,
// inlined calls included, from the module map the trace recorded, after the process is gone.
//
// Every address in a gpuleak stack is a return address: it points after a call, possibly at the next
// line or past the end of the function, so the instruction before it (address - 1) is looked up. The
// recorder never stores the interrupted program counter, so no frame is exempt.
//
// A module is opened when an address first falls in it (see DebugModule for which file is used), and
// each address is resolved once: stacks of a trace share most of their frames. With a cache directory,
// the frames of modules with DWARF are also kept there between reports (symbol_cache.h), and written
// when its ModuleRegistry is destroyed. Not thread-safe: one thread at a time, read_ahead() included,
// and with a shared registry, one thread at a time among the Symbolizers that share it.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <stop_token>
#include <string>
#include <unordered_map>
#include <vector>

#include "read/trace_reader.h"
#include "symbols/address_index.h"
#include "symbols/source_frame.h"

namespace gpuleak::analyzer {

class DebugModule;
class ModuleFrameCache;

// The modules that the stacks of one or more traces pass through, each opened once, for Symbolizers to
// share: the processes of a run (a job's ranks, a loader's workers) load the same libraries at other
// addresses, and a library's symbol table and debug info take tens of MiB (libtorch's) and a file
// descriptor or more each. A module is known by its path and build id. Its frames kept between reports
// (symbol_cache.h) are written when the registry is destroyed. Not thread-safe, as Symbolizer.
class ModuleRegistry {
  public:
    // `debuginfo_path`: where separate debug info is looked for, in elfutils' syntax (see
    // dwfl_standard_find_debuginfo in elfutils/libdwfl.h); its absolute directories are searched by
    // build id (".build-id/xx/yyyy.debug"). Empty means elfutils' default, ":.debug:/usr/lib/debug".
    // `cache_directory`: where frames are kept between reports; empty for none.
    explicit ModuleRegistry(std::string debuginfo_path = {}, std::string cache_directory = {});
    ~ModuleRegistry();
    ModuleRegistry(const ModuleRegistry&) = delete;
    ModuleRegistry& operator=(const ModuleRegistry&) = delete;

    struct Opened {
        // As the first trace to reach it recorded it, and opened where that trace had loaded it: another
        // trace's addresses are moved by the difference of the two load addresses.
        Module module;
        std::unique_ptr<DebugModule> debug;
        std::unique_ptr<ModuleFrameCache> cache; // null while not made, or where the module is not usable
    };
    // The module `module` names, opened the first time it is asked for.
    Opened& open(const Module& module);
    // How many modules were opened.
    [[nodiscard]] size_t size() const { return modules_.size(); }
    // Its frames kept between reports; null where the module is not usable.
    ModuleFrameCache* frame_cache(Opened& opened);

  private:
    std::string debuginfo_path_;
    std::string cache_directory_;
    std::map<std::pair<std::string, std::vector<uint8_t>>, std::unique_ptr<Opened>> modules_;
};

class Symbolizer {
  public:
    // With a registry of its own: see ModuleRegistry for the arguments.
    explicit Symbolizer(const std::vector<Module>& modules, std::string debuginfo_path = {},
                        std::string cache_directory = {});
    // Sharing `registry`'s modules with the other Symbolizers given it.
    Symbolizer(const std::vector<Module>& modules, std::shared_ptr<ModuleRegistry> registry);
    Symbolizer(const Symbolizer&) = delete;
    Symbolizer& operator=(const Symbolizer&) = delete;

    // The frames for one return address, innermost (most deeply inlined) first; at least one. An
    // address outside every module, or in a module that cannot be used or has no symbol there, gives
    // one frame with symbolized == false (show it as module+0xoffset). The reference stays valid for
    // the Symbolizer's lifetime.
    const std::vector<SourceFrame>& symbolize(uint64_t return_address);

    // One line per module whose frames stay unsymbolized because its file is missing, rebuilt or not
    // an ELF file, in the order symbolize() first reached them: this grows with symbolize(), and
    // read_ahead() adds nothing to it.
    [[nodiscard]] const std::vector<std::string>& warnings() const { return warnings_; }

    // Opens the modules that `return_addresses` fall in and reads their debug info, the fixed cost
    // that the first symbolize() in each would pay, so that a second thread can pay it while the
    // caller's thread does other work. The modules most addresses fall in go first, and those whose
    // cached frames cover every address in them are left unread; it returns early once `stop` is
    // requested. What symbolize() and warnings() give afterwards is unchanged.
    void read_ahead(const std::vector<uint64_t>& return_addresses, const std::stop_token& stop);

  private:
    struct Slot {
        Module module;
        ModuleRegistry::Opened* opened =
            nullptr;          // null until an address falls in the module, or read_ahead()
        bool reached = false; // by symbolize(), which warns then if the module is unusable
    };
    ModuleRegistry::Opened& opened(Slot& slot);

    std::shared_ptr<ModuleRegistry> registry_;
    std::vector<Slot> slots_;
    AddressIndex<size_t> index_; // address range -> slot
    std::unordered_map<uint64_t, std::vector<SourceFrame>> frames_;
    std::vector<std::string> warnings_;
};

} // namespace gpuleak::analyzer
