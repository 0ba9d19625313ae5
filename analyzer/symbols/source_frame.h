// One source-level frame of a native call stack, as the symbolizer resolves it.
#pragma once

#include <cstdint>
#include <string>

namespace gpuleak::analyzer {

struct SourceFrame {
    std::string function; // demangled; empty when no symbol covers the address
    std::string file;     // empty without line information
    uint32_t line = 0;    // 0 when unknown
    bool inlined = false; // inlined into the next frame of the same address
    // The module as recorded in the trace (empty when the address lies in none) and the return address
    // relative to its load address: the address to give `addr2line -e module` (minus one for the call).
    // Outside every module, module_offset is the address itself.
    std::string module;
    uint64_t module_offset = 0;
    bool symbolized = false; // function is known; when false, show module+0xoffset
    bool stale = false;      // the module's file has another build id than recorded: it was rebuilt
};

} // namespace gpuleak::analyzer
