// Facts about an object the dynamic loader mapped, from its program headers.
#pragma once

#include <cstdint>
#include <link.h>

namespace gpuleak {

struct AddressRange {
    uint64_t low = UINT64_MAX; // lowest mapped address of its PT_LOAD segments
    uint64_t high = 0;         // one past the highest; 0 when it has none
    [[nodiscard]] bool contains(uint64_t address) const { return address >= low && address < high; }
};

inline AddressRange loaded_range(const dl_phdr_info& info) {
    AddressRange range;
    for (int i = 0; i < info.dlpi_phnum; ++i) {
        const ElfW(Phdr)& header = info.dlpi_phdr[i];
        if (header.p_type != PT_LOAD)
            continue;
        const uint64_t start = info.dlpi_addr + header.p_vaddr;
        range.low = start < range.low ? start : range.low;
        range.high = start + header.p_memsz > range.high ? start + header.p_memsz : range.high;
    }
    return range;
}

} // namespace gpuleak
