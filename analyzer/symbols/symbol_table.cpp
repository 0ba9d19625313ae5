#include "symbols/symbol_table.h"

namespace gpuleak::analyzer {

SymbolTable::SymbolTable(Dwfl_Module* module) {
    std::vector<AddressIndex<const char*>::Entry> functions;
    const int count = dwfl_module_getsymtab(module);
    for (int i = 1; i < count; ++i) {
        GElf_Sym symbol;
        GElf_Addr address = 0; // st_value adjusted to where the module was loaded
        const char* name = dwfl_module_getsym_info(module, i, &symbol, &address, nullptr, nullptr, nullptr);
        const int type = GELF_ST_TYPE(symbol.st_info);
        if (name != nullptr && name[0] != '\0' && (type == STT_FUNC || type == STT_GNU_IFUNC) &&
            symbol.st_shndx != SHN_UNDEF && symbol.st_size > 0)
            functions.push_back({address, address + symbol.st_size, name});
    }
    index_ = AddressIndex<const char*>(std::move(functions));
}

const char* SymbolTable::at(uint64_t address) const {
    const char* const* name = index_.find(address);
    return name != nullptr ? *name : nullptr;
}

} // namespace gpuleak::analyzer
