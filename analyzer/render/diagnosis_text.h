// The diagnosis in plain words, with the numbers it rests on and what to do: what every renderer shows
// as the verdict's text.
#pragma once

#include <string>
#include <vector>

#include "report.h"

namespace gpuleak::analyzer {

std::string diagnosis_text(const ProcessModel& model, const Diagnosis& diagnosis, StackFrames& stacks);

// What makes the process's figures less than exact (ProcessModel::exactness), a sentence each: what
// the renderers show beside the figures. Empty when they are exact.
std::vector<std::string> exactness_notes(const ProcessModel& model);

// "96 blocks" (a sub-allocator's, PyTorch's tensors), "3 device allocations".
std::string allocations_of(format::MemoryKind kind, uint64_t count);

// The marker interval `index` of LeakSite::marker_range: its marker's label, "the start" before the first.
std::string marker_interval_name(const ProcessModel& model, int index);

// "under a second", "about 40 s", "about 3.5 min", "about 2.1 h", "about 4.0 days".
std::string human_duration(double seconds);

} // namespace gpuleak::analyzer
