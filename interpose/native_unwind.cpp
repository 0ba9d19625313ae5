#include "native_unwind.h"

#include "config.h"
#include "loaded_object.h"

#define UNW_LOCAL_ONLY
#include <libunwind.h>

#include <dlfcn.h>
#include <link.h>

namespace gpuleak {

namespace {

// Empty (contains nothing) until init_native_unwind finds the recorder in a shared object.
AddressRange g_self{};

struct SelfSearch {
    uint64_t address;
    AddressRange range;
    bool is_main_program;
};

int find_self(dl_phdr_info* info, size_t, void* data) {
    auto* search = static_cast<SelfSearch*>(data);
    const AddressRange range = loaded_range(*info);
    if (!range.contains(search->address))
        return 0;
    search->range = range;
    search->is_main_program = info->dlpi_name == nullptr || info->dlpi_name[0] == '\0';
    return 1;
}

#if defined(__SANITIZE_THREAD__)
// unw_backtrace keeps a per-thread trace cache that libunwind frees from a thread-exit destructor;
// under ThreadSanitizer that destructor runs after the thread's sanitizer state is gone and crashes.
// Stepping frame by frame uses no such cache: slower, and only the TSan build needs it.
int unwind_into(void** buffer, int wanted) {
    unw_context_t context;
    unw_cursor_t cursor;
    if (unw_getcontext(&context) != 0 || unw_init_local(&cursor, &context) != 0)
        return 0;
    int count = 0;
    while (count < wanted && unw_step(&cursor) > 0) {
        unw_word_t ip = 0;
        unw_get_reg(&cursor, UNW_REG_IP, &ip);
        buffer[count++] = reinterpret_cast<void*>(ip);
    }
    return count;
}
#else
int unwind_into(void** buffer, int wanted) {
    return unw_backtrace(buffer, wanted);
}
#endif

} // namespace

void init_native_unwind() {
    // Per-thread caches make repeated unwinds through the same code cheap and need no locks.
    unw_set_caching_policy(unw_local_addr_space, UNW_CACHE_PER_THREAD);
    SelfSearch search{reinterpret_cast<uint64_t>(&capture_native_stack), {}, false};
    if (dl_iterate_phdr(find_self, &search) == 1 && !search.is_main_program)
        g_self = search.range;
}

uint32_t capture_native_stack(uint64_t* frames, uint32_t max_frames) {
    constexpr int kSkipBudget = 16;
    void* buffer[kMaxStackDepthSetting + kSkipBudget];
    int wanted = static_cast<int>(max_frames) + kSkipBudget;
    if (wanted > static_cast<int>(sizeof buffer / sizeof buffer[0]))
        wanted = static_cast<int>(sizeof buffer / sizeof buffer[0]);
    int count = unwind_into(buffer, wanted);
    int first = 0;
    while (first < count && g_self.contains(reinterpret_cast<uint64_t>(buffer[first])))
        ++first;
    uint32_t kept = 0;
    for (int i = first; i < count && kept < max_frames; ++i)
        frames[kept++] = reinterpret_cast<uint64_t>(buffer[i]);
    return kept;
}

} // namespace gpuleak
