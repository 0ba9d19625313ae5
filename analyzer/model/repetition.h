// Whether a site's memory was made across repetitions of the program's work (the steps of a loop, with
// which a leak grows) or in one stretch (set-up: a model's parameters, an optimizer's state, a dataset
// moved to the device once), whatever share of the program's events that stretch took: a program that
// fails right after loading its model made nothing else.
//
// Between two consecutive survivors of a site, s and t, a repetition is seen when memory made after the
// survivor before s (after s, between the first two) was freed between s and t, and was made at another
// call of a function that t's stack passes through: from the outermost frame in, the first frame where
// the two stacks differ is the same function at another call site (a Python function, by its file, name
// and first line, at another instruction; a native program's return addresses, below an outermost frame
// both share). The program went on past the survivor's call, made and dropped memory elsewhere, and came
// back to make another survivor. What a single call frees within itself at the survivors' own call
// site (a backward pass) makes no repetition: a backward pass's memory is made on PyTorch's autograd
// thread, whose stacks hold no Python frames, and stands at the call of the allocation with Python
// frames made last before it, the program's `loss.backward()`. A library's thread stands after the stack
// that started it (ThreadStarts).
#pragma once

#include <cstdint>
#include <vector>

#include "read/trace_reader.h"

namespace gpuleak::analyzer {

struct Repetitions {
    // The ring held the events around at least three of the site's survivors, and at least `enough` gaps
    // between them could be judged (their stacks lined up, with the transients' in them): `seen` is what
    // they say. Otherwise nothing is known (the ring wrapped past them, stacks were cut at the depth
    // limit or not kept).
    bool known = false;
    uint64_t seen = 0; // between consecutive survivors the ring holds, counted up to `enough`
};

// For each site, given the event numbers of its survivors (any order), the repetitions seen between them.
// Survivors numbered `program_events` or later were made by the program's teardown and are left out.
std::vector<Repetitions> find_repetitions(const TraceReader& trace,
                                          const std::vector<std::vector<uint64_t>>& survivors,
                                          uint64_t program_events, uint64_t enough);

} // namespace gpuleak::analyzer
