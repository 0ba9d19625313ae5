// Event times, in nanoseconds on the CLOCK_MONOTONIC timeline.
//
// clock_gettime costs about 15 ns even through the vDSO, twice per allocation/free pair. Where the
// kernel itself keeps time with the CPU's time-stamp counter (its clock source is "tsc", so the counter
// runs at a constant rate and agrees across CPUs), the counter, scaled, gives the same timeline for a
// few nanoseconds. The scale comes from pairs of (counter, CLOCK_MONOTONIC) readings that the timeline
// sampler takes every interval; before the second pair, or without a usable counter, the time comes
// from clock_gettime.
#pragma once

#include <cstdint>

namespace gpuleak {

// Decides once per process whether the counter can be used.
void init_monotonic_clock();

uint64_t monotonic_ns();

// Takes a new (counter, CLOCK_MONOTONIC) reading and publishes the scale from the first reading to this
// one. Never moves the clock back: a reading behind the current scale's prediction keeps the
// prediction. Called from one thread at a time (the sampler).
void recalibrate_monotonic_clock();

} // namespace gpuleak
