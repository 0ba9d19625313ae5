// The functions of one DWARF compilation unit and the calls inlined into them, indexed by address.
//
// Built with one walk of the unit's DIEs; a lookup then costs a binary search, where libdw's
// dwarf_getscopes walks the unit from its root on every call (and, past the first inlined instance,
// follows the abstract origin instead of the caller, so callers need dwarf_getscopes_die and a second
// walk). Symbolizing a trace looks up thousands of addresses in the same few units.
#pragma once

#include <cstdint>
#include <vector>

#include <elfutils/libdw.h>

#include "symbols/address_index.h"

namespace gpuleak::analyzer {

class UnitScopes {
  public:
    explicit UnitScopes(Dwarf_Die* unit);

    // The DIEs at the file address `pc`, innermost first: the inlined instances (DW_TAG_inlined_subroutine)
    // that contain it, then the function (DW_TAG_subprogram) they were inlined into. Empty when no
    // function of the unit has code there.
    [[nodiscard]] std::vector<Dwarf_Die> at(Dwarf_Addr pc) const;

  private:
    struct Scope {
        Dwarf_Die die;
        int32_t caller; // the scope this one was inlined into; -1 for a function
    };

    void collect(Dwarf_Die* parent, int32_t enclosing, std::vector<AddressIndex<uint32_t>::Entry>& ranges);

    std::vector<Scope> scopes_;
    AddressIndex<uint32_t> index_; // address -> innermost scope
};

} // namespace gpuleak::analyzer
