// Facts about an object the dynamic loader mapped, from its program headers.
#pragma once

#include <cstdint>
#include <cstring>
#include <dlfcn.h>
#include <elf.h>
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

// glibc's _dl_find_object (2.35+), as found at run time: a carried build (GPULEAK_STATIC_DEPS) also runs
// on glibc 2.34, which lacks it.
using FindObjectFunction = int (*)(void*, dl_find_object*);

// The loaded object holding `address`, nullptr for none. With `find_object` (glibc's _dl_find_object:
// lock-free and allocation-free), else with dladdr1, under the loader's lock.
inline const link_map* object_holding(const void* address, FindObjectFunction find_object) {
    if (find_object != nullptr) {
        dl_find_object found{};
        return find_object(const_cast<void*>(address), &found) == 0 ? found.dlfo_link_map : nullptr;
    }
    Dl_info info;
    link_map* map = nullptr;
    if (dladdr1(address, &info, reinterpret_cast<void**>(&map), RTLD_DL_LINKMAP) == 0)
        return nullptr;
    return map;
}

// The GNU build id from an object's PT_NOTE segments, if any.
inline uint32_t find_build_id(const dl_phdr_info* info, uint8_t* out, uint32_t capacity) {
    for (int i = 0; i < info->dlpi_phnum; ++i) {
        const ElfW(Phdr)& header = info->dlpi_phdr[i];
        if (header.p_type != PT_NOTE)
            continue;
        // The loader reports segments as load address plus offset: an integer by nature.
        // NOLINTNEXTLINE(performance-no-int-to-ptr)
        auto* cursor = reinterpret_cast<const uint8_t*>(info->dlpi_addr + header.p_vaddr);
        const uint8_t* end = cursor + header.p_memsz;
        while (cursor + sizeof(ElfW(Nhdr)) <= end) {
            const auto* note = reinterpret_cast<const ElfW(Nhdr)*>(cursor);
            const uint8_t* name = cursor + sizeof(ElfW(Nhdr));
            const uint8_t* desc = name + ((note->n_namesz + 3) & ~3u);
            if (desc + note->n_descsz > end)
                break;
            if (note->n_type == NT_GNU_BUILD_ID && note->n_namesz == 4 && std::memcmp(name, "GNU", 4) == 0) {
                uint32_t bytes = note->n_descsz < capacity ? note->n_descsz : capacity;
                std::memcpy(out, desc, bytes);
                return bytes;
            }
            cursor = desc + ((note->n_descsz + 3) & ~3u);
        }
    }
    return 0;
}

} // namespace gpuleak
