#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <ctime>
#include <thread>

#include "recording/monotonic_clock.h"

namespace {

uint64_t clock_gettime_ns() {
    timespec now{};
    clock_gettime(CLOCK_MONOTONIC, &now);
    return static_cast<uint64_t>(now.tv_sec) * 1000000000ull + static_cast<uint64_t>(now.tv_nsec);
}

} // namespace

TEST_CASE("the event clock follows CLOCK_MONOTONIC and never goes back while it is recalibrated") {
    gpuleak::init_monotonic_clock();
    std::atomic<bool> done{false};
    // The sampler's role: a reading now and then, from one thread.
    std::thread sampler([&done] {
        while (!done.load()) {
            gpuleak::recalibrate_monotonic_clock();
            std::this_thread::sleep_for(std::chrono::milliseconds(25));
        }
    });
    uint64_t previous = gpuleak::monotonic_ns();
    uint64_t backwards = 0;
    int64_t worst_gap = 0;
    const uint64_t end = clock_gettime_ns() + 300'000'000;
    while (clock_gettime_ns() < end) {
        for (int i = 0; i < 1000; ++i) {
            const uint64_t now = gpuleak::monotonic_ns();
            backwards += now < previous ? 1 : 0;
            previous = now;
        }
        const uint64_t before = clock_gettime_ns();
        const uint64_t ours = gpuleak::monotonic_ns();
        const uint64_t after = clock_gettime_ns();
        const int64_t gap = ours < before  ? static_cast<int64_t>(before - ours)
                            : ours > after ? static_cast<int64_t>(ours - after)
                                           : 0;
        worst_gap = std::max(worst_gap, gap);
    }
    done = true;
    sampler.join();
    CHECK(backwards == 0);
    CHECK(worst_gap < 1'000'000);
}
