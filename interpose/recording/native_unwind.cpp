#include "recording/native_unwind.h"

#include "recording/config.h"
#include "recording/loaded_object.h"
#include "recording/repeated_stack_cache.h"

#define UNW_LOCAL_ONLY
#include <libunwind.h>

#include <algorithm>
#include <cstring>
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

// Room for the recorder's own frames, which are unwound and then left out.
constexpr int kSkipBudget = 16;
constexpr int kMaxRawFrames = static_cast<int>(kMaxStackDepthSetting) + kSkipBudget;

// Both variants are inlined into capture_native_stack, so the first frame they report is its own.
#if defined(__SANITIZE_THREAD__)
// unw_backtrace keeps a per-thread trace cache that libunwind frees from a thread-exit destructor;
// under ThreadSanitizer that destructor runs after the thread's sanitizer state is gone and crashes.
// Stepping frame by frame uses no such cache: slower, and only the TSan build needs it.
__attribute__((always_inline)) inline int unwind_into(void** buffer, int wanted) {
    unw_context_t context;
    unw_cursor_t cursor;
    if (unw_getcontext(&context) != 0 || unw_init_local(&cursor, &context) != 0)
        return 0;
    int count = 0;
    do {
        unw_word_t ip = 0;
        unw_get_reg(&cursor, UNW_REG_IP, &ip);
        buffer[count++] = reinterpret_cast<void*>(ip);
    } while (count < wanted && unw_step(&cursor) > 0);
    return count;
}
#else
__attribute__((always_inline)) inline int unwind_into(void** buffer, int wanted) {
    return unw_backtrace(buffer, wanted);
}
#endif

// The program's frames among `raw` (the caller of capture_native_stack first): the recorder's own
// frames at the top are left out.
uint32_t keep_program_frames(void* const* raw, int count, uint64_t* frames, uint32_t max_frames) {
    int first = 0;
    while (first < count && g_self.contains(reinterpret_cast<uint64_t>(raw[first])))
        ++first;
    uint32_t kept = 0;
    for (int i = first; i < count && kept < max_frames; ++i)
        frames[kept++] = reinterpret_cast<uint64_t>(raw[i]);
    return kept;
}

// A function that realigns its stack pointer (`and $-N, %rsp` in its prologue) may find its canonical
// frame address in memory the cache does not watch (GCC's DRAP), so stacks through it are not cached.
bool realigns_stack(unw_cursor_t& cursor) {
    unw_proc_info_t info{};
    if (unw_get_proc_info(&cursor, &info) != 0 || info.start_ip == 0 || info.end_ip <= info.start_ip)
        return true;
    const size_t length = std::min<size_t>(info.end_ip - info.start_ip, 32);
    // NOLINTNEXTLINE(performance-no-int-to-ptr): the unwinder reports code addresses as integers.
    const auto* code = reinterpret_cast<const uint8_t*>(info.start_ip);
    for (size_t i = 0; i + 3 <= length; ++i) {
        const bool and_rsp =
            code[i] == 0x48 && (code[i + 1] == 0x83 || code[i + 1] == 0x81) && code[i + 2] == 0xe4;
        if (and_rsp)
            return true;
    }
    return false;
}

__attribute__((no_sanitize("address"))) bool add_word(VerifiedStack& entry, const RepeatedStackCache& cache,
                                                      const unw_save_loc_t& location) {
    if (location.type != UNW_SLT_MEMORY || !cache.on_thread_stack(location.u.addr) ||
        entry.word_count == VerifiedStack::kMaxWords)
        return false;
    // NOLINTNEXTLINE(performance-no-int-to-ptr): the unwinder reports where it read a register.
    entry.words[entry.word_count++] = {location.u.addr, *reinterpret_cast<const uint64_t*>(location.u.addr)};
    return true;
}

// Unwinds frame by frame, noting the address and value of every word the unwind depends on above
// `anchor` (the stack pointer of capture_native_stack; what lies below belongs to this call and is
// gone by the next capture): each saved return address, and the saved frame pointer of each frame
// whose canonical frame address came from its frame pointer. Other frames' saved frame pointers are
// left out: functions built without frame pointers keep arbitrary values in that register, which would
// make every capture look different. Keeps the result when it finds exactly `expected`. Ten times
// slower than unw_backtrace, so only done for stacks that repeat.
__attribute__((noinline)) void remember_verified(RepeatedStackCache& cache, uint64_t anchor,
                                                 const uint64_t* expected, uint32_t expected_count,
                                                 uint32_t max_frames) {
    if (!cache.on_thread_stack(anchor))
        return;
    unw_context_t context;
    unw_cursor_t cursor;
    if (unw_getcontext(&context) != 0 || unw_init_local(&cursor, &context) != 0)
        return;
    VerifiedStack candidate;
    int own_frames = 0;
    bool stepped_from_realigned = false;
    int step = 0;
    while (candidate.frame_count < max_frames) {
        unw_word_t frame_pointer = 0;
        unw_save_loc_t frame_pointer_location{};
        if (unw_get_reg(&cursor, UNW_X86_64_RBP, &frame_pointer) != 0 ||
            unw_get_save_loc(&cursor, UNW_X86_64_RBP, &frame_pointer_location) != 0)
            return;
        if ((step = unw_step(&cursor)) <= 0)
            break;
        // Only a step from it reads memory through its rule: `_start` realigns, yet ends every stack.
        if (stepped_from_realigned)
            return;
        unw_word_t stack_pointer = 0;
        unw_get_reg(&cursor, UNW_REG_SP, &stack_pointer);
        const bool found_through_frame_pointer = stack_pointer == frame_pointer + 16;
        if (found_through_frame_pointer && frame_pointer_location.type == UNW_SLT_MEMORY &&
            frame_pointer_location.u.addr >= anchor && !add_word(candidate, cache, frame_pointer_location))
            return;
        unw_save_loc_t return_address{};
        if (unw_get_save_loc(&cursor, UNW_X86_64_RIP, &return_address) != 0 ||
            return_address.type != UNW_SLT_MEMORY)
            return;
        if (return_address.u.addr < anchor)
            continue; // capture_native_stack's own frame
        if (unw_is_signal_frame(&cursor) > 0 || !add_word(candidate, cache, return_address))
            return;
        stepped_from_realigned = realigns_stack(cursor);
        unw_word_t ip = 0;
        unw_get_reg(&cursor, UNW_REG_IP, &ip);
        if (candidate.frame_count == 0 && g_self.contains(ip)) {
            if (++own_frames > kSkipBudget)
                return;
            continue;
        }
        candidate.frames[candidate.frame_count++] = ip;
    }
    if (step < 0 || candidate.frame_count != expected_count ||
        std::memcmp(candidate.frames, expected, expected_count * sizeof(uint64_t)) != 0)
        return;
    candidate.anchor = anchor;
    candidate.max_frames = max_frames;
    cache.remember(candidate);
}

} // namespace

void init_native_unwind() {
    // Per-thread caches make repeated unwinds through the same code cheap and need no locks.
    unw_set_caching_policy(unw_local_addr_space, UNW_CACHE_PER_THREAD);
    SelfSearch search{reinterpret_cast<uint64_t>(&capture_native_stack), {}, false};
    if (dl_iterate_phdr(find_self, &search) == 1 && !search.is_main_program)
        g_self = search.range;
}

// Built with a frame pointer (see CMakeLists.txt), so that its frame's layout, and with it where the
// unwind of its callers starts, follows from the stack pointer alone.
__attribute__((noinline)) NativeStack capture_native_stack(uint64_t* buffer, uint32_t max_frames) {
    uint64_t anchor = 0;
    asm volatile("mov %%rsp, %0" : "=r"(anchor));
    RepeatedStackCache* cache = max_frames <= VerifiedStack::kMaxFrames ? thread_stack_cache() : nullptr;
    if (cache != nullptr) {
        if (const VerifiedStack* known = cache->find(anchor, max_frames))
            return {known->frames, known->frame_count, known->serial};
    }
    void* raw[kMaxRawFrames];
    const int wanted = std::min(static_cast<int>(max_frames) + kSkipBudget + 1, kMaxRawFrames);
    const int count = unwind_into(raw, wanted);
    // The first frame is this function's own.
    const uint32_t kept = count > 1 ? keep_program_frames(raw + 1, count - 1, buffer, max_frames) : 0;
    if (cache != nullptr && kept > 0 && cache->worth_learning(anchor, buffer, kept))
        remember_verified(*cache, anchor, buffer, kept, max_frames);
    return {buffer, kept, 0};
}

} // namespace gpuleak
