// A module's function symbols (.symtab, or .dynsym when stripped) indexed by address.
//
// libdwfl's dwfl_module_addrinfo scans the whole symbol table on every call; libraries without debug
// info (the CUDA driver, many wheels) are named from their symbols alone, and have hundreds of thousands.
#pragma once

#include <cstdint>

#include <elfutils/libdwfl.h>

#include "symbols/address_index.h"

namespace gpuleak::analyzer {

class SymbolTable {
  public:
    explicit SymbolTable(Dwfl_Module* module);

    // The raw (mangled) name of the function whose code covers the run-time `address`, or null. The
    // name lives as long as the module's Dwfl session.
    [[nodiscard]] const char* at(uint64_t address) const;

  private:
    AddressIndex<const char*> index_;
};

} // namespace gpuleak::analyzer
