// The bounds and defaults of the GPULEAK_* settings: the recorder applies them to the environment it
// reads, the launcher checks its options against them before it sets that environment.
#pragma once

#include <cstddef>
#include <cstdint>

namespace gpuleak {

inline constexpr uint64_t kDefaultMaxMb = 256;
inline constexpr uint64_t kMinMaxMb = 4;
inline constexpr uint64_t kMaxMaxMb = 65536;
inline constexpr uint32_t kDefaultStackDepth = 64;
inline constexpr uint32_t kMaxStackDepthSetting = 256;
inline constexpr uint32_t kDefaultSampleMs = 100;
inline constexpr uint32_t kMinSampleMs = 1;
inline constexpr uint32_t kMaxSampleMs = 60000;
inline constexpr size_t kMaxRankDigits = 9;
// GPULEAK_OUTPUT, with its terminating null.
inline constexpr size_t kOutputPatternCapacity = 1024;

} // namespace gpuleak
