// A thread's recently captured stacks, each kept with the stack memory its unwind depended on.
//
// An unwind is a function of the stack pointer it starts from and the memory it reads: the saved
// return addresses and saved frame pointers of the frames it walks (for frames whose canonical frame
// address follows from the stack or frame pointer, which the unwinder checks before a stack is kept
// here). When a capture starts from the same stack pointer and every remembered word still holds the
// value it held, a new unwind would read the same words and find the same frames, so the frames are
// taken from here instead: a few dozen loads instead of an unwind. Allocation loops, the common case,
// capture the same stack from the same depth again and again.
#pragma once

#include <cstdint>

namespace gpuleak {

struct StackWord {
    uint64_t address;
    uint64_t value;
};

struct VerifiedStack {
    static constexpr uint32_t kMaxFrames = 64;
    static constexpr uint32_t kMaxWords = 160;

    uint64_t anchor = 0; // stack pointer of the capturing frame; 0 while the entry is empty
    uint64_t last_use = 0;
    uint64_t serial = 0;     // unique among the thread's fills: the same serial means the same frames
    uint32_t max_frames = 0; // the depth limit the frames were captured under
    uint32_t frame_count = 0;
    uint32_t word_count = 0;
    uint64_t frames[kMaxFrames] = {};
    StackWord words[kMaxWords] = {};
};

class RepeatedStackCache {
  public:
    // The thread's stack: only words inside it are trusted to stay readable.
    RepeatedStackCache(uint64_t stack_low, uint64_t stack_high)
        : stack_low_(stack_low), stack_high_(stack_high) {}

    // A stack captured from `anchor` under the same depth limit whose words are all unchanged.
    const VerifiedStack* find(uint64_t anchor, uint32_t max_frames);

    // Notes an unwind from `anchor` that found no cached stack; true when the slower unwind that learns
    // the stack's words is worth it: the same frames were unwound from there before, and learning has
    // paid off on this thread so far (hits) or has not been tried for a while. A thread whose stacks
    // repeat rarely, or more of them than there are entries, then stops paying for it.
    bool worth_learning(uint64_t anchor, const uint64_t* frames, uint32_t count);

    [[nodiscard]] uint64_t learning_attempts() const { return attempts_; }

    // Keeps `learned` (anchor, depth limit, frames and words filled in) in place of the least recently
    // used entry, with a serial of its own.
    void remember(const VerifiedStack& learned);

    [[nodiscard]] bool on_thread_stack(uint64_t address) const {
        return address >= stack_low_ && address + sizeof(uint64_t) <= stack_high_;
    }

  private:
    static constexpr uint32_t kEntries = 4;
    static constexpr uint32_t kCandidates = 16;
    // Learning a stack costs about as much as 30 plain unwinds.
    static constexpr uint64_t kFreeAttempts = 8;
    static constexpr uint64_t kHitsPerAttempt = 32;
    static constexpr uint64_t kMissesBetweenRetries = 1024;

    struct Candidate {
        uint64_t anchor;
        uint64_t frames_hash;
    };

    uint64_t stack_low_;
    uint64_t stack_high_;
    uint64_t use_clock_ = 0;
    uint64_t fill_serial_ = 0;
    uint64_t hits_ = 0;
    uint64_t attempts_ = 0;
    uint64_t misses_since_attempt_ = 0;
    VerifiedStack entries_[kEntries];
    Candidate candidates_[kCandidates] = {};
};

// The calling thread's cache, created on its first use and released when the thread exits; nullptr
// when the thread's stack bounds are unknown or memory is short, and after the thread's destructors
// ran.
RepeatedStackCache* thread_stack_cache();

} // namespace gpuleak
