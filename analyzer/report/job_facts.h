// A job of several ranks read as one: a row for each rank, the ranks whose memory stands apart from
// their peers', and the leaks that ranks share, told by the program's line where each grows.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "model/diagnosis.h"
#include "model/physical_devices.h"

namespace gpuleak::analyzer {

struct ProcessReport;

struct RankRow {
    size_t process = 0; // among the run's reports
    int pid = 0;
    int rank = -1;
    int local_rank = -1;
    int node_rank = -1;
    std::string host;
    std::vector<int> devices; // where it reserved memory or made a context, ascending
    uint64_t peak_reserved = 0;
    uint64_t final_reserved = 0;
    uint64_t peak_allocated = 0;
    uint64_t final_allocated = 0;
    DiagnosisKind verdict = DiagnosisKind::Stable;
    uint64_t leaked = 0; // what the sites where it grows held at its end; 0 where it does not grow
    // Where its leak grows the most, else where it held the most as its code ended; empty where it held
    // nothing. StackFrames::describe's words: "train.py:88 in train_step".
    std::string top_site;
    uint64_t top_site_bytes = 0; // what it held there at its end
};

// A context or memory a rank made on another rank's device (the one where that rank, on the same
// machine, reserved the most): what a rank makes that touches the GPU before
// torch.cuda.set_device(local_rank), on device 0. A context alone takes hundreds of MiB there.
struct IntrudingRank {
    size_t index = 0; // into JobFacts::ranks: the rank that intrudes
    int device = 0;   // the intruder's ordinal of it
    int owner = -1;   // the rank whose device it is
    bool context = false;
    uint64_t peak_reserved = 0; // the intruder's, there
    // Where it first touched the device (its context's stack), else where it made the oldest of what it
    // still held there; empty where neither is known.
    std::string first_site;
};

// Sites that leak on two ranks or more, named alike on each.
struct SharedLeak {
    std::string site;
    std::vector<int> ranks; // ascending
    uint64_t bytes = 0;     // held there as the ranks' code ended, over all of them
};

// A rank whose peak of reserved memory, or whose growth, stands apart from the other ranks': at least 1.5
// times the median of theirs, and 8 MiB above it. Growth stands apart only where its peers grow too (a
// rank that alone grows is the job's only leak).
enum class ApartBy { Peak, Growth };
struct ApartRank {
    size_t index = 0; // into JobFacts::ranks
    ApartBy by = ApartBy::Peak;
    uint64_t peers_median = 0;
};

// A rank that ran out of device memory, or was killed (by a signal, or leaving no end record).
struct FailedRank {
    size_t index = 0; // into JobFacts::ranks
    // Its first out-of-memory failure: what it asked for, on which device, what it had reserved there
    // then, and where it was asked for.
    bool out_of_memory = false;
    uint64_t asked_bytes = 0;
    int device = 0;
    std::optional<uint64_t> reserved_then;
    std::string failure_site;
    bool killed = false;
    uint64_t ended_realtime_ns = 0; // when it ended, on the wall clock: comparable across machines
};

struct JobFacts {
    std::string id;             // empty where the traces name none
    int world_size = -1;        // as the ranks say; -1 where they do not
    std::vector<RankRow> ranks; // by rank
    std::vector<ApartRank> apart;
    std::vector<IntrudingRank> intruding;
    std::vector<FailedRank> failed;
    std::vector<SharedLeak> shared_leaks; // on the most ranks first
};

// The site a rank's row names: its leak's first site, else the one it held the most in; none where it held
// nothing.
const LeakSite* top_site(const ProcessReport& report);
// The site that `model` still held on `device` from the earliest on; none where it held nothing there.
const LeakSite* oldest_site_on(const ProcessModel& model, int device);

// The job of the run's ranks; none where no process is a rank.
std::shared_ptr<const JobFacts> job_facts(std::vector<ProcessReport>& reports,
                                          const PhysicalDevices& devices);

// Where process `process` (RankRow::process) first touched `device`, in StackFrames::describe's words; empty
// where unknown.
using FirstTouch = std::function<std::string(size_t process, int device)>;

// The ranks that made contexts or memory on another rank's device of their machine (IntrudingRank), added
// to `job`, whose rows are by rank; RankRow::process indexes `models`.
void find_intruders(JobFacts& job, const std::vector<const ProcessModel*>& models,
                    const PhysicalDevices& devices, const FirstTouch& first_touch);

// What the ranks' rows say of them together: the ranks that stand apart, the leaks they share. `job` has
// its rows, by rank; what it said before is replaced.
void judge_ranks(JobFacts& job);

// How a rank's process ended, in words ("killed by signal 15 (SIGTERM) after 4.0 s: ..."): what the
// renderers say a killed rank did, from its model or from the report a machine wrote of it.
using EndedText = std::function<std::string(const RankRow&)>;

} // namespace gpuleak::analyzer
