// The verdict in plain words: what kind of memory problem a process has, with the numbers, and what
// to do about it. Reads only the process model.
#pragma once

#include <functional>
#include <string>

#include "process_model.h"

namespace gpuleak::analyzer {

enum class DiagnosisKind { Leak, CacheGrowth, OutsideAllocators, HostRamGrowth, Stable };

const char* diagnosis_kind_name(DiagnosisKind kind); // the JSON names: "leak", "cache_growth", ...

struct Diagnosis {
    DiagnosisKind kind = DiagnosisKind::Stable;
    std::string text;
};

// `describe_site` names a stack in a few words ("keep_history (train.cpp:88)").
Diagnosis diagnose(const ProcessModel& model,
                   const std::function<std::string(uint32_t stack_id)>& describe_site);

// "1.5 GiB", "512 B": the sizes the report prints.
std::string human_bytes(double bytes);

} // namespace gpuleak::analyzer
