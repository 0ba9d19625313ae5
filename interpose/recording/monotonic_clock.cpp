#include "recording/monotonic_clock.h"

#include <atomic>
#include <cstring>
#include <ctime>
#include <fcntl.h>
#include <unistd.h>
#include <x86intrin.h>

namespace gpuleak {

namespace {

uint64_t clock_gettime_ns() {
    timespec now{};
    clock_gettime(CLOCK_MONOTONIC, &now);
    return static_cast<uint64_t>(now.tv_sec) * 1000000000ull + static_cast<uint64_t>(now.tv_nsec);
}

struct Reading {
    uint64_t counter;
    uint64_t ns;
};

// The counter read on both sides of clock_gettime, the tightest of a few tries.
Reading read_both() {
    Reading best{};
    uint64_t best_width = UINT64_MAX;
    for (int attempt = 0; attempt < 4; ++attempt) {
        const uint64_t before = __rdtsc();
        const uint64_t ns = clock_gettime_ns();
        const uint64_t after = __rdtsc();
        if (after - before < best_width) {
            best_width = after - before;
            best = {before + (after - before) / 2, ns};
        }
    }
    return best;
}

constinit std::atomic<bool> g_counter_usable{false};

// A sequence lock around the scale: odd while the sampler rewrites it, 0 until the first scale.
constinit std::atomic<uint32_t> g_sequence{0};
constinit std::atomic<uint64_t> g_base_counter{0};
constinit std::atomic<uint64_t> g_base_ns{0};
constinit std::atomic<uint64_t> g_ns_per_count_q32{0}; // nanoseconds per count, times 2^32

// The sampler's own state.
constinit Reading g_first{};

int64_t scaled(int64_t counts, uint64_t ns_per_count_q32) {
    return static_cast<int64_t>((static_cast<__int128>(counts) * static_cast<__int128>(ns_per_count_q32)) >>
                                32);
}

bool kernel_keeps_time_with_counter() {
    const int fd =
        ::open("/sys/devices/system/clocksource/clocksource0/current_clocksource", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return false;
    char name[32] = {};
    const ssize_t n = ::read(fd, name, sizeof name - 1);
    ::close(fd);
    return n >= 3 && std::strncmp(name, "tsc", 3) == 0 && (n == 3 || name[3] == '\n');
}

} // namespace

void init_monotonic_clock() {
    g_counter_usable.store(kernel_keeps_time_with_counter(), std::memory_order_relaxed);
}

uint64_t monotonic_ns() {
    const uint32_t sequence = g_sequence.load(std::memory_order_acquire);
    if (sequence == 0 || (sequence & 1u) != 0)
        return clock_gettime_ns();
    const uint64_t counter = __rdtsc();
    // Acquire loads keep the second look at the sequence after them (fences would do, but
    // ThreadSanitizer does not model them).
    const uint64_t base_counter = g_base_counter.load(std::memory_order_acquire);
    const uint64_t base_ns = g_base_ns.load(std::memory_order_acquire);
    const uint64_t ns_per_count = g_ns_per_count_q32.load(std::memory_order_acquire);
    if (g_sequence.load(std::memory_order_relaxed) != sequence)
        return clock_gettime_ns();
    return base_ns +
           static_cast<uint64_t>(scaled(static_cast<int64_t>(counter - base_counter), ns_per_count));
}

void recalibrate_monotonic_clock() {
    // Shorter baselines give a scale too coarse to be worth it.
    constexpr uint64_t kMinimumBaselineNs = 20'000'000;
    if (!g_counter_usable.load(std::memory_order_relaxed))
        return;
    const Reading now = read_both();
    if (g_first.counter == 0 || now.counter <= g_first.counter || now.ns <= g_first.ns) {
        g_first = now;
        return;
    }
    if (now.ns - g_first.ns < kMinimumBaselineNs)
        return;
    const uint64_t ns_per_count = static_cast<uint64_t>(
        (static_cast<unsigned __int128>(now.ns - g_first.ns) << 32) / (now.counter - g_first.counter));
    uint64_t base_ns = now.ns;
    const uint32_t sequence = g_sequence.load(std::memory_order_relaxed);
    if (sequence != 0) {
        const uint64_t predicted =
            g_base_ns.load(std::memory_order_relaxed) +
            static_cast<uint64_t>(
                scaled(static_cast<int64_t>(now.counter - g_base_counter.load(std::memory_order_relaxed)),
                       g_ns_per_count_q32.load(std::memory_order_relaxed)));
        base_ns = predicted > base_ns ? predicted : base_ns;
    }
    // The odd sequence is in place before any new field, and a reader that loads a new field (its
    // acquire pairs with the release) sees the sequence odd or moved on.
    g_sequence.fetch_add(1, std::memory_order_acquire);
    g_base_counter.store(now.counter, std::memory_order_release);
    g_base_ns.store(base_ns, std::memory_order_release);
    g_ns_per_count_q32.store(ns_per_count, std::memory_order_release);
    g_sequence.store(sequence + 2, std::memory_order_release);
}

} // namespace gpuleak
