// The directory of one run: every trace of it and the report. A directory holds one run only, so that
// `gpuleak-report DIR` later tells the same story as the summary.
#pragma once

#include <ctime>
#include <optional>
#include <string>
#include <vector>

#include "common/file_descriptor.h"

namespace gpuleak::launcher {

struct RunDirectory {
    std::string path;     // absolute: the command and its children may change directory
    bool created = false; // by the launcher, which removes it again if the run leaves nothing in it
    // The directory, open: the report and the kernel's death summary are written into it, whatever
    // happens to its path meanwhile.
    FileDescriptor handle{-1};
};

// `requested` (-o) is created if missing and must otherwise be an empty directory. Without one, a new
// directory is made under `parent`, named after the command and `started` (local time),
// gpuleak-python-20261130-093012, with -2, -3, ... appended when that name is taken: never an existing
// one. The directory must be the user's and writable by no one else (directory_trust.h). Throws
// LauncherError (one line) when the directory cannot be made or used.
RunDirectory make_run_directory(const std::string& requested, const std::string& command, std::time_t started,
                                const std::string& parent = ".");

// This machine's name, as gethostname() gives it; empty where it cannot.
std::string machine_name();

// gpuleak run's part of a job's output directory, where it runs in a job of several machines or tasks that
// share one -o DIR: its name there. Under srun (SLURM_STEP_ID set, SLURM_NTASKS above 1) it is
// "<host>.task<SLURM_PROCID>"; running torchrun (or python -m torch.distributed.run) for several machines
// (--nnodes other than 1, or a --node-rank), "<host>.node<K>", or "<host>" without a --node-rank.
struct JobPart {
    std::string name;
};

// The part of the launch that runs `command` on the machine `host` (made safe for a file name) with
// `environment`; none outside a job.
std::optional<JobPart> job_part(const std::vector<std::string>& command, const std::string& host,
                                const std::vector<std::string>& environment);

// The run directory of one launch of a job: its `part` inside the job's directory `requested` (-o),
// which the job's launches share and which is made when missing; with -2, -3, ... appended when another
// launch took the name first. Throws LauncherError (one line), as make_run_directory.
RunDirectory make_job_run_directory(const std::string& requested, const JobPart& part);

// Removes the directory if the launcher created it and nothing was written into it.
void remove_if_unused(const RunDirectory& directory);

} // namespace gpuleak::launcher
