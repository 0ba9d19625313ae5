// The verdict: what kind of memory problem a process has and the quantities it rests on, as facts
// (diagnosis_text.h phrases them). Reads only the process model.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "process_model.h"

namespace gpuleak::analyzer {

// Incomplete: nothing else was found, but data was lost that a leak may hide in (Exactness::lost).
enum class DiagnosisKind { Leak, CacheGrowth, OutsideAllocators, HostRamGrowth, Incomplete, Stable };

const char* diagnosis_kind_name(DiagnosisKind kind); // the JSON names: "leak", "cache_growth", ...

// Where the top growing site would take its device at the rate it grew.
struct FillEstimate {
    int device = 0;
    uint64_t free_bytes = 0; // the least free memory the driver reported on it
    double seconds = 0;      // at the site's bytes per second
    double allocations = 0;  // at the site's bytes per allocation
};

struct LeakFacts {
    std::vector<size_t> sites; // ProcessModel::growth_sites: into leak_sites, largest first
    uint64_t bytes = 0;        // held by them at the end
    std::optional<FillEstimate> fill;
};

// Reserved memory the caching allocator holds beyond what the program ever needed at once.
struct CacheFacts {
    int device = 0;
    uint64_t peak_allocated = 0;
    uint64_t final_allocated = 0;
    uint64_t peak_reserved = 0;
    uint64_t final_reserved = 0;
};

struct OutsideFacts {
    int device = 0;
    uint64_t used_by_driver = 0; // the most in use per the driver
    uint64_t obtained = 0;       // the most reserved through the calls gpuleak sees
};

struct HostRamFacts {
    uint64_t first_rss = 0;
    uint64_t last_rss = 0;
    bool before_finalizing = false; // last_rss is the last sample before Python finalized
};

struct Diagnosis {
    DiagnosisKind kind = DiagnosisKind::Stable;
    // Over all devices.
    uint64_t peak_allocated = 0;
    uint64_t final_allocated = 0;
    uint64_t final_reserved = 0;
    std::optional<LeakFacts> leak;        // kind Leak
    std::optional<CacheFacts> cache;      // kind CacheGrowth
    std::optional<OutsideFacts> outside;  // kind OutsideAllocators
    std::optional<HostRamFacts> host_ram; // kind HostRamGrowth
    // Cached bytes worth a mention in a verdict that is not about them.
    uint64_t cached_at_end = 0;
    // The out-of-memory failure with the largest request: an index into model.failures.
    std::optional<size_t> largest_failure;
};

Diagnosis diagnose(const ProcessModel& model);

// "1.5 GiB", "512 B": the sizes the report prints.
std::string human_bytes(double bytes);

} // namespace gpuleak::analyzer
