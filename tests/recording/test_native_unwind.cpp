#include <catch2/catch.hpp>

#include <algorithm>
#include <array>
#include <cstdint>
#include <thread>
#include <vector>

#include "recording/native_unwind.h"
#include "recording/repeated_stack_cache.h"

using gpuleak::capture_native_stack;
using gpuleak::NativeStack;

namespace {

struct Captured {
    std::vector<uint64_t> frames;
    uint64_t repeat_serial = 0;
    uintptr_t frame_address = 0;
};

// The recorder is linked into this test program, so nothing is left out as its own: the first frame is
// in capture_from_here, the second in its caller.
__attribute__((noinline)) Captured capture_from_here(uint32_t max_frames) {
    std::array<uint64_t, 64> buffer{};
    const NativeStack stack = capture_native_stack(buffer.data(), max_frames);
    Captured captured{{stack.frames, stack.frames + stack.count},
                      stack.repeat_serial,
                      reinterpret_cast<uintptr_t>(__builtin_frame_address(0))};
    asm volatile("" : : "r"(&captured) : "memory");
    return captured;
}

// Two call sites in one function: the same frame, so the capture below starts from the same stack
// pointer, but a different return address in this frame.
__attribute__((noinline)) Captured capture_via_site(int site) {
    Captured captured;
    if (site == 1) {
        captured = capture_from_here(64);
        asm volatile("nop" : : : "memory");
    } else {
        captured = capture_from_here(64);
        asm volatile("nop; nop" : : : "memory");
    }
    return captured;
}

// Captures from `depth` frames below the caller: a different stack pointer for each depth.
__attribute__((noinline)) Captured capture_below(int depth) {
    Captured captured = depth == 0 ? capture_from_here(64) : capture_below(depth - 1);
    asm volatile("" : : "r"(&captured) : "memory");
    return captured;
}

} // namespace

TEST_CASE("a stack captured again from the same place comes from the cache with the same frames") {
    gpuleak::init_native_unwind();
    std::vector<Captured> captures;
    for (int i = 0; i < 6; ++i)
        captures.push_back(capture_from_here(64));
    REQUIRE(captures[0].frames.size() > 3);
    // The first capture unwinds; the second unwinds again and learns the stack's words; later ones hit.
    CHECK(captures[0].repeat_serial == 0);
    CHECK(captures[1].repeat_serial == 0);
    for (int i = 2; i < 6; ++i) {
        CHECK(captures[i].repeat_serial != 0);
        CHECK(captures[i].repeat_serial == captures[2].repeat_serial);
    }
    for (const Captured& captured : captures)
        CHECK(captured.frames == captures[0].frames);
}

TEST_CASE("a different caller at the same stack depth is not taken for the cached stack") {
    gpuleak::init_native_unwind();
    // One call site here, so that only the site inside capture_via_site differs.
    constexpr std::array<int, 14> kSites = {1, 1, 1, 1, 2, 2, 2, 2, 1, 2, 1, 2, 1, 2};
    std::vector<Captured> captures;
    for (int site : kSites)
        captures.push_back(capture_via_site(site));
    const Captured& first_site = captures[0];
    const Captured& second_site = captures[4];
    REQUIRE(captures[3].repeat_serial != 0);
    // Same depth and layout: the cached entry's stack pointer matches and only its words can tell.
    REQUIRE(second_site.frame_address == first_site.frame_address);
    CHECK(second_site.repeat_serial == 0);
    REQUIRE(second_site.frames.size() == first_site.frames.size());
    CHECK(second_site.frames[0] == first_site.frames[0]);
    CHECK(second_site.frames[1] != first_site.frames[1]);
    CHECK(
        std::equal(second_site.frames.begin() + 2, second_site.frames.end(), first_site.frames.begin() + 2));
    // Both stacks are cached by then, and alternating captures still get their own frames.
    for (size_t i = 0; i < kSites.size(); ++i) {
        CHECK(captures[i].frames == (kSites[i] == 1 ? first_site.frames : second_site.frames));
        if (i >= 8)
            CHECK(captures[i].repeat_serial != 0);
    }
}

TEST_CASE("the depth limit is honoured for cached stacks") {
    gpuleak::init_native_unwind();
    for (int i = 0; i < 4; ++i) {
        const Captured shallow = capture_from_here(3);
        const Captured deep = capture_from_here(64);
        REQUIRE(shallow.frames.size() == 3);
        REQUIRE(deep.frames.size() > 3);
        // The first two frames are in capture_from_here (or a clone of it for the constant argument) and
        // at the two different calls above.
        CHECK(std::equal(shallow.frames.begin() + 2, shallow.frames.end(), deep.frames.begin() + 2));
    }
}

TEST_CASE("threads keep their cached stacks apart") {
    gpuleak::init_native_unwind();
    constexpr int kThreads = 4;
    constexpr int kCaptures = 2000;
    std::vector<int> mismatches(kThreads, 0);
    std::vector<int> hits(kThreads, 0);
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
        threads.emplace_back([t, &mismatches, &hits] {
            std::vector<uint64_t> first;
            for (int i = 0; i < kCaptures; ++i) {
                const Captured again = capture_via_site(1 + t % 2);
                if (i == 0)
                    first = again.frames;
                mismatches[t] += again.frames != first ? 1 : 0;
                hits[t] += again.repeat_serial != 0 ? 1 : 0;
            }
        });
    }
    for (std::thread& thread : threads)
        thread.join();
    for (int t = 0; t < kThreads; ++t) {
        CHECK(mismatches[t] == 0);
        CHECK(hits[t] == kCaptures - 2);
    }
}

TEST_CASE("learning stacks costs a thread no more than the cache saves it") {
    gpuleak::init_native_unwind();
    // Eight places in rotation and four entries: a stack learned is often evicted before it comes round.
    constexpr int kDepths = 8;
    constexpr int kCaptures = 12000;
    uint64_t attempts = 0;
    uint64_t hits = 0;
    int mismatches = 0;
    std::thread thread([&] {
        std::vector<std::vector<uint64_t>> first(kDepths);
        for (int i = 0; i < kCaptures; ++i) {
            const Captured captured = capture_below(i % kDepths);
            if (i < kDepths)
                first[i] = captured.frames;
            mismatches += captured.frames != first[i % kDepths] ? 1 : 0;
            hits += captured.repeat_serial != 0 ? 1 : 0;
        }
        attempts = gpuleak::thread_stack_cache()->learning_attempts();
    });
    thread.join();
    CHECK(mismatches == 0);
    // A few free tries, then one per 32 hits or per 1,024 misses: without that budget nearly every
    // capture would try.
    CHECK(attempts <= 8 + hits / 32 + kCaptures / 1024 + 1);
    CHECK(attempts < kCaptures / 20);
}
