#include "symbols/unit_scopes.h"

#include <dwarf.h>

namespace gpuleak::analyzer {

UnitScopes::UnitScopes(Dwarf_Die* unit) {
    std::vector<AddressIndex<uint32_t>::Entry> ranges;
    collect(unit, -1, ranges);
    // An inlined instance's ranges lie inside its caller's and it is collected after it, so the
    // index's rule (the covering range that starts last, or was given last) picks the innermost.
    index_ = AddressIndex<uint32_t>(std::move(ranges));
}

std::vector<Dwarf_Die> UnitScopes::at(Dwarf_Addr pc) const {
    std::vector<Dwarf_Die> chain;
    const uint32_t* innermost = index_.find(pc);
    for (int32_t scope = innermost != nullptr ? static_cast<int32_t>(*innermost) : -1; scope >= 0;
         scope = scopes_[scope].caller)
        chain.push_back(scopes_[scope].die);
    return chain;
}

// Functions are found wherever they are: at the top of the unit, in namespaces and classes, nested in
// other functions (local classes, lambdas). An inlined instance belongs to the innermost function or
// inlined instance around it; lexical blocks in between do not matter.
void UnitScopes::collect(Dwarf_Die* parent, int32_t enclosing,
                         std::vector<AddressIndex<uint32_t>::Entry>& ranges) {
    Dwarf_Die child;
    if (dwarf_child(parent, &child) != 0)
        return;
    do {
        const int tag = dwarf_tag(&child);
        // A function nested in another is called, not inlined: it starts a chain of its own.
        int32_t scope = tag == DW_TAG_subprogram ? -1 : enclosing;
        if (tag == DW_TAG_subprogram || (tag == DW_TAG_inlined_subroutine && enclosing >= 0)) {
            const auto id = static_cast<uint32_t>(scopes_.size());
            const size_t before = ranges.size();
            Dwarf_Addr base = 0;
            Dwarf_Addr low = 0;
            Dwarf_Addr high = 0;
            for (ptrdiff_t offset = 0; (offset = dwarf_ranges(&child, offset, &base, &low, &high)) > 0;)
                ranges.push_back({low, high, id});
            // Declarations and abstract (not concrete) instances have no code.
            if (ranges.size() > before) {
                scopes_.push_back({child, scope});
                scope = static_cast<int32_t>(id);
            }
        }
        collect(&child, scope, ranges);
    } while (dwarf_siblingof(&child, &child) == 0);
}

} // namespace gpuleak::analyzer
