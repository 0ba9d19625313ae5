#include "recording/repeated_stack_cache.h"

#include <new>
#include <pthread.h>
#include <sys/mman.h>

namespace gpuleak {

namespace {

uint64_t hash_frames(const uint64_t* frames, uint32_t count) {
    uint64_t hash = 0x9e3779b97f4a7c15ull ^ count;
    for (uint32_t i = 0; i < count; ++i)
        hash = (hash ^ frames[i]) * 0xff51afd7ed558ccdull;
    return hash ^ (hash >> 29);
}

uint32_t candidate_index(uint64_t anchor, uint32_t candidates) {
    return static_cast<uint32_t>((anchor >> 4) * 0x9e3779b97f4a7c15ull >> 32) % candidates;
}

// Reads the caller frames' saved words of this very thread. Under AddressSanitizer those words sit
// between other frames' red zones, which the check must not trip over.
__attribute__((no_sanitize("address"))) bool words_unchanged(const VerifiedStack& entry) {
    // No early exit: the loads are independent and all in the cache, so they overlap.
    uint64_t difference = 0;
    for (uint32_t i = 0; i < entry.word_count; ++i) {
        // The addresses are slots of this thread's stack that the unwinder read from.
        // NOLINTNEXTLINE(performance-no-int-to-ptr)
        const auto* word = reinterpret_cast<const volatile uint64_t*>(entry.words[i].address);
        difference |= *word ^ entry.words[i].value;
    }
    return difference == 0;
}

enum class CacheState : uint8_t { Unset, Ready, Gone };

__attribute__((tls_model("initial-exec"))) constinit thread_local RepeatedStackCache* t_cache = nullptr;
__attribute__((tls_model("initial-exec"))) constinit thread_local CacheState t_state = CacheState::Unset;

pthread_key_t g_release_key;
pthread_once_t g_release_key_once = PTHREAD_ONCE_INIT;
bool g_release_key_ready = false;

void release_thread_cache(void* cache) {
    static_cast<RepeatedStackCache*>(cache)->~RepeatedStackCache();
    munmap(cache, sizeof(RepeatedStackCache));
    t_cache = nullptr;
    // Destructors of other thread-local objects may still allocate; they unwind the slow way.
    t_state = CacheState::Gone;
}

void create_release_key() {
    g_release_key_ready = pthread_key_create(&g_release_key, release_thread_cache) == 0;
}

bool thread_stack_bounds(uint64_t& low, uint64_t& high) {
    pthread_attr_t attributes;
    if (pthread_getattr_np(pthread_self(), &attributes) != 0)
        return false;
    void* base = nullptr;
    size_t size = 0;
    const bool known = pthread_attr_getstack(&attributes, &base, &size) == 0 && base != nullptr && size > 0;
    pthread_attr_destroy(&attributes);
    if (!known)
        return false;
    low = reinterpret_cast<uint64_t>(base);
    high = low + size;
    return true;
}

RepeatedStackCache* create_thread_cache() {
    pthread_once(&g_release_key_once, create_release_key);
    uint64_t low = 0;
    uint64_t high = 0;
    if (!g_release_key_ready || !thread_stack_bounds(low, high))
        return nullptr;
    void* memory =
        mmap(nullptr, sizeof(RepeatedStackCache), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (memory == MAP_FAILED)
        return nullptr;
    auto* cache = new (memory) RepeatedStackCache(low, high);
    if (pthread_setspecific(g_release_key, cache) != 0) {
        release_thread_cache(cache);
        return nullptr;
    }
    return cache;
}

} // namespace

const VerifiedStack* RepeatedStackCache::find(uint64_t anchor, uint32_t max_frames) {
    for (VerifiedStack& entry : entries_) {
        if (entry.anchor != anchor || entry.max_frames != max_frames || !words_unchanged(entry))
            continue;
        entry.last_use = ++use_clock_;
        ++hits_;
        return &entry;
    }
    return nullptr;
}

bool RepeatedStackCache::worth_learning(uint64_t anchor, const uint64_t* frames, uint32_t count) {
    ++misses_since_attempt_;
    Candidate& candidate = candidates_[candidate_index(anchor, kCandidates)];
    const uint64_t frames_hash = hash_frames(frames, count);
    if (candidate.anchor != anchor || candidate.frames_hash != frames_hash) {
        candidate = {anchor, frames_hash};
        return false;
    }
    const bool affordable = attempts_ < kFreeAttempts || hits_ >= attempts_ * kHitsPerAttempt ||
                            misses_since_attempt_ >= kMissesBetweenRetries;
    if (!affordable)
        return false;
    ++attempts_;
    misses_since_attempt_ = 0;
    return true;
}

void RepeatedStackCache::remember(const VerifiedStack& learned) {
    VerifiedStack* oldest = &entries_[0];
    for (VerifiedStack& entry : entries_) {
        if (entry.last_use < oldest->last_use)
            oldest = &entry;
    }
    *oldest = learned;
    oldest->last_use = ++use_clock_;
    oldest->serial = ++fill_serial_;
}

RepeatedStackCache* thread_stack_cache() {
    if (t_state == CacheState::Unset) {
        t_cache = create_thread_cache();
        t_state = t_cache != nullptr ? CacheState::Ready : CacheState::Gone;
    }
    return t_cache;
}

} // namespace gpuleak
