// When the hooks ask the driver what is used on a device (cuMemGetInfo), after an allocation or a free of
// device memory there: often enough that the timeline's samples carry an answer that keeps up with the
// program's own steps, seldom enough that a program that allocates and frees at a high rate (a
// stream-ordered pool) does not wait on the driver.
#pragma once

#include <algorithm>
#include <cstdint>

namespace gpuleak {

// Every 100 ms whatever happened; sooner once what the program holds there moved by a sixteenth (and at
// least 1 MiB) since the last answer; never within 1 ms of it.
inline constexpr uint64_t kDriverViewIntervalNs = 100'000'000;
inline constexpr uint64_t kDriverViewMinGapNs = 1'000'000;
inline constexpr uint64_t kDriverViewMinMovedBytes = uint64_t{1} << 20;

// Whether what the program holds on the device moved enough since the driver was last asked: `held` now,
// `held_then` then.
constexpr bool driver_view_moved(uint64_t held, uint64_t held_then) {
    const uint64_t moved = held > held_then ? held - held_then : held_then - held;
    return moved >= std::max(kDriverViewMinMovedBytes, held_then / 16);
}

// `since_ns`: the time since the driver was last asked about the device (UINT64_MAX: never).
constexpr bool driver_view_due(uint64_t since_ns, bool moved) {
    return since_ns >= kDriverViewMinGapNs && (since_ns >= kDriverViewIntervalNs || moved);
}

// The interval is looked at on every this many calls of a thread only: the clock is read then, or when
// the memory moved.
inline constexpr uint32_t kDriverViewCallsBetweenClockReads = 32;

} // namespace gpuleak
