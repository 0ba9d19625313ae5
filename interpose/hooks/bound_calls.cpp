#include "hooks/bound_calls.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <dlfcn.h>
#include <elf.h>
#include <link.h>
#include <mutex>
#include <string_view>
#include <sys/mman.h>
#include <unistd.h>
#include <vector>

#include "recording/loaded_object.h"

namespace gpuleak {
namespace {

#if defined(__x86_64__)
constexpr uint32_t kJumpSlot = R_X86_64_JUMP_SLOT;
constexpr uint32_t kGlobalData = R_X86_64_GLOB_DAT;
constexpr uint32_t kAbsolute = R_X86_64_64;
#elif defined(__aarch64__)
constexpr uint32_t kJumpSlot = R_AARCH64_JUMP_SLOT;
constexpr uint32_t kGlobalData = R_AARCH64_GLOB_DAT;
constexpr uint32_t kAbsolute = R_AARCH64_ABS64;
#else
#error "gpuleak attach rewrites x86-64 and AArch64 relocations only"
#endif

struct Export {
    std::string_view name;
    uintptr_t address;
};

// A slot rewritten, in the object loaded at `object` (its dl_phdr_info::dlpi_addr).
struct Rewritten {
    uintptr_t slot;
    uintptr_t before;
    uintptr_t ours;
    uintptr_t object;
};

std::mutex g_lock;
std::vector<Export> g_exports; // by name
std::vector<uintptr_t> g_objects_done;
unsigned long long g_loads_seen = 0;
std::vector<Rewritten> g_rewritten;

// A dynamic entry's address: the loader adjusts them by the load bias in place where the section is
// writable, and leaves them as linked where it is not (the vDSO's).
uintptr_t dynamic_address(const dl_phdr_info& info, ElfW(Addr) value) {
    return value < info.dlpi_addr ? info.dlpi_addr + value : value;
}

struct DynamicTables {
    const ElfW(Sym) * symbols = nullptr;
    const char* names = nullptr;
    const uint32_t* gnu_hash = nullptr;
    const ElfW(Rela) * plt = nullptr;
    size_t plt_bytes = 0;
    bool plt_is_rela = false;
    const ElfW(Rela) * data = nullptr;
    size_t data_bytes = 0;
};

DynamicTables dynamic_tables(const dl_phdr_info& info) {
    DynamicTables tables;
    for (int i = 0; i < info.dlpi_phnum; ++i) {
        const ElfW(Phdr)& header = info.dlpi_phdr[i];
        if (header.p_type != PT_DYNAMIC)
            continue;
        // NOLINTNEXTLINE(performance-no-int-to-ptr): the loader gives addresses as integers
        for (const auto* entry = reinterpret_cast<const ElfW(Dyn)*>(info.dlpi_addr + header.p_vaddr);
             entry->d_tag != DT_NULL; ++entry) {
            const uintptr_t address = dynamic_address(info, entry->d_un.d_ptr);
            // NOLINTBEGIN(performance-no-int-to-ptr)
            switch (entry->d_tag) {
            case DT_SYMTAB:
                tables.symbols = reinterpret_cast<const ElfW(Sym)*>(address);
                break;
            case DT_STRTAB:
                tables.names = reinterpret_cast<const char*>(address);
                break;
            case DT_GNU_HASH:
                tables.gnu_hash = reinterpret_cast<const uint32_t*>(address);
                break;
            case DT_JMPREL:
                tables.plt = reinterpret_cast<const ElfW(Rela)*>(address);
                break;
            case DT_PLTRELSZ:
                tables.plt_bytes = entry->d_un.d_val;
                break;
            case DT_PLTREL:
                tables.plt_is_rela = entry->d_un.d_val == DT_RELA;
                break;
            case DT_RELA:
                tables.data = reinterpret_cast<const ElfW(Rela)*>(address);
                break;
            case DT_RELASZ:
                tables.data_bytes = entry->d_un.d_val;
                break;
            default:
                break;
            }
            // NOLINTEND(performance-no-int-to-ptr)
        }
    }
    return tables;
}

// How many symbols the GNU hash table covers: past the highest bucket's chain, whose last entry has
// its low bit set.
size_t gnu_hash_symbol_count(const uint32_t* table) {
    const uint32_t buckets = table[0];
    const uint32_t first_hashed = table[1];
    const uint32_t bloom_words = table[2];
    const auto* bucket =
        reinterpret_cast<const uint32_t*>(reinterpret_cast<const ElfW(Addr)*>(table + 4) + bloom_words);
    const uint32_t* chain = bucket + buckets;
    uint32_t last = 0;
    for (uint32_t i = 0; i < buckets; ++i)
        last = std::max(last, bucket[i]);
    if (last < first_hashed)
        return first_hashed;
    while ((chain[last - first_hashed] & 1u) == 0)
        ++last;
    return last + 1;
}

bool holds_this_file(const dl_phdr_info& info) {
    return loaded_range(info).contains(reinterpret_cast<uintptr_t>(&redirect_bound_calls));
}

// What the preload would have put first: libgpuleak's exported functions, less its own API (gpuleak_*,
// which no object was linked against) and PyTorch's C++ functions whose calls it watches (whether the
// program set saved-tensor hooks before the attach cannot be known from calls made after it).
int collect_exports(dl_phdr_info* info, size_t /*size*/, void* /*data*/) {
    if (!holds_this_file(*info))
        return 0;
    const DynamicTables tables = dynamic_tables(*info);
    if (tables.symbols == nullptr || tables.names == nullptr || tables.gnu_hash == nullptr)
        return 1;
    const size_t count = gnu_hash_symbol_count(tables.gnu_hash);
    for (size_t i = 1; i < count; ++i) {
        const ElfW(Sym)& symbol = tables.symbols[i];
        const std::string_view name = tables.names + symbol.st_name;
        if (symbol.st_shndx == SHN_UNDEF || ELF64_ST_TYPE(symbol.st_info) != STT_FUNC ||
            ELF64_ST_VISIBILITY(symbol.st_other) != STV_DEFAULT || name.starts_with("gpuleak_") ||
            name.starts_with("_Z"))
            continue;
        g_exports.push_back({name, info->dlpi_addr + symbol.st_value});
    }
    std::sort(g_exports.begin(), g_exports.end(),
              [](const Export& a, const Export& b) { return a.name < b.name; });
    return 1;
}

const Export* export_named(std::string_view name) {
    const auto found =
        std::lower_bound(g_exports.begin(), g_exports.end(), name,
                         [](const Export& entry, std::string_view key) { return entry.name < key; });
    return found != g_exports.end() && found->name == name ? &*found : nullptr;
}

uintptr_t slot_value(uintptr_t slot) {
    // NOLINTNEXTLINE(performance-no-int-to-ptr): a slot of a loaded object, by address
    return __atomic_load_n(reinterpret_cast<const uintptr_t*>(slot), __ATOMIC_ACQUIRE);
}

// Stores `value` in `slot`, making a RELRO page writable for the store and read-only again after; false
// for a slot in no writable or RELRO part of the object (text relocations).
bool store(const dl_phdr_info& info, uintptr_t slot, uintptr_t value) {
    bool writable = false;
    bool relro = false;
    for (int i = 0; i < info.dlpi_phnum; ++i) {
        const ElfW(Phdr)& header = info.dlpi_phdr[i];
        const uintptr_t start = info.dlpi_addr + header.p_vaddr;
        if (slot < start || slot + sizeof(uintptr_t) > start + header.p_memsz)
            continue;
        if (header.p_type == PT_GNU_RELRO)
            relro = true;
        else if (header.p_type == PT_LOAD && (header.p_flags & PF_W) != 0)
            writable = true;
    }
    if (!writable && !relro)
        return false;
    const auto page_size = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
    // NOLINTNEXTLINE(performance-no-int-to-ptr): a page of the object, by address
    auto* page = reinterpret_cast<void*>(slot & ~(page_size - 1));
    if (relro && ::mprotect(page, page_size, PROT_READ | PROT_WRITE) != 0)
        return false;
    // Other threads call through the slot meanwhile: they find the old function or the new one.
    // NOLINTNEXTLINE(performance-no-int-to-ptr)
    __atomic_store_n(reinterpret_cast<uintptr_t*>(slot), value, __ATOMIC_RELEASE);
    if (relro)
        ::mprotect(page, page_size, PROT_READ);
    return true;
}

template <class Visit> void each_symbol_slot(const dl_phdr_info& info, Visit&& visit) {
    const DynamicTables tables = dynamic_tables(info);
    if (tables.symbols == nullptr || tables.names == nullptr)
        return;
    const auto walk = [&](const ElfW(Rela) * relocations, size_t bytes) {
        for (size_t i = 0; relocations != nullptr && i < bytes / sizeof(ElfW(Rela)); ++i) {
            const ElfW(Rela)& relocation = relocations[i];
            const auto type = static_cast<uint32_t>(ELF64_R_TYPE(relocation.r_info));
            const auto index = static_cast<uint32_t>(ELF64_R_SYM(relocation.r_info));
            if (index == 0 || !(type == kJumpSlot || type == kGlobalData ||
                                (type == kAbsolute && relocation.r_addend == 0)))
                continue;
            visit(info.dlpi_addr + relocation.r_offset, tables.names + tables.symbols[index].st_name);
        }
    };
    if (tables.plt_is_rela)
        walk(tables.plt, tables.plt_bytes);
    walk(tables.data, tables.data_bytes);
}

int redirect_object(dl_phdr_info* info, size_t /*size*/, void* /*data*/) {
    const uintptr_t object = info->dlpi_addr;
    if (holds_this_file(*info) ||
        std::find(g_objects_done.begin(), g_objects_done.end(), object) != g_objects_done.end())
        return 0;
    g_objects_done.push_back(object);
    each_symbol_slot(*info, [&](uintptr_t slot, const char* name) {
        const Export* ours = export_named(name);
        if (ours == nullptr)
            return;
        const uintptr_t before = slot_value(slot);
        if (before == ours->address || !store(*info, slot, ours->address))
            return;
        g_rewritten.push_back({slot, before, ours->address, object});
    });
    return 0;
}

int restore_object(dl_phdr_info* info, size_t /*size*/, void* /*data*/) {
    for (const Rewritten& rewritten : g_rewritten)
        if (rewritten.object == info->dlpi_addr && !holds_this_file(*info) &&
            slot_value(rewritten.slot) == rewritten.ours)
            store(*info, rewritten.slot, rewritten.before);
    return 0;
}

unsigned long long loads_so_far() {
    unsigned long long loads = 0;
    dl_iterate_phdr(
        [](dl_phdr_info* info, size_t, void* data) {
            *static_cast<unsigned long long*>(data) = info->dlpi_adds;
            return 1;
        },
        &loads);
    return loads;
}

} // namespace

void redirect_bound_calls() {
    const std::lock_guard<std::mutex> guard(g_lock);
    if (g_exports.empty())
        dl_iterate_phdr(collect_exports, nullptr);
    const unsigned long long loads = loads_so_far();
    if (loads == g_loads_seen)
        return;
    dl_iterate_phdr(redirect_object, nullptr);
    g_loads_seen = loads;
}

void restore_bound_calls() {
    const std::lock_guard<std::mutex> guard(g_lock);
    dl_iterate_phdr(restore_object, nullptr);
    g_rewritten.clear();
    g_objects_done.clear();
    g_loads_seen = 0;
}

} // namespace gpuleak
