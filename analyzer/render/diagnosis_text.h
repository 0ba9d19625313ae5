// The diagnosis in plain words, with the numbers it rests on and what to do: what every renderer shows
// as the verdict's text.
#pragma once

#include <string>
#include <vector>

#include "report/job_facts.h"
#include "report/report.h"

namespace gpuleak::analyzer {

std::string diagnosis_text(const ProcessModel& model, const Diagnosis& diagnosis, StackFrames& stacks);

// What makes the process's figures less than exact (ProcessModel::exactness), a sentence each: what
// the renderers show beside the figures. Empty when they are exact.
std::vector<std::string> exactness_notes(const ProcessModel& model);

// What made the process's host memory grow and what to do, in a paragraph.
std::string host_growth_text(const ProcessModel& model, const HostRamFacts& host);

// The same in a few words: "its unique memory (USS) grew by 279.0 MiB while its RSS grew by 3.0 MiB".
std::string host_growth_brief(const HostRamFacts& host);

// The exception the program's code ended with, in one line: "RuntimeError: mat1 and mat2 shapes cannot
// be multiplied (32x1000 and 1024x1024), at train.py:9 in <module>" (a cell's line: "at cell [12], line
// 4"), its message on one line and cut to a few hundred characters, with the failed allocation it reports
// where it reports one; printable.
std::string program_error_text(const ProcessModel& model, const ProgramError& error);

// The notebook's cells that raised, the latest in one line: "cell [12] raised torch.OutOfMemoryError:
// CUDA out of memory. ..., at cell [12], line 4 (...)", with how many cells raised before it; empty
// where none did.
std::string cell_errors_text(const ProcessModel& model);

// How the process ended, for its header: "exited with status 1 after 3.0 s", "killed by signal 15 (SIGTERM)
// after 3.0 s: sent by pid 812 (bash), its parent", "killed: no exit record (...)"; printable.
std::string ended_text(const ProcessModel& model);

// ended_text of each rank's process among `reports`, for the job's table and findings.
EndedText ended_texts(const std::vector<ProcessReport>& reports);

// Who or what sent the signal that ended the process, as its end record says: "sent by pid 812 (bash), its
// parent", "Ctrl-C at its terminal", "the kernel's OOM killer sent it"; printable. Empty where that is not
// known, or where the signal says it all (a fault: SIGSEGV, SIGBUS, SIGFPE, SIGILL).
std::string sender_text(const ProcessModel& model);

// Why a process left no end record and what it and the run held at its last sample.
std::string killed_text(const ProcessModel& model, const KilledFacts& killed);

// How near the run came to its memory limit, and what the OOM killer does there.
std::string pressure_text(const MemoryPressureFacts& pressure);

// What the run's memory cgroup (or the machine) held at the run's fullest.
std::string run_memory_held(const RunMemoryFacts& peak);

// Who the process is among those of its run ("DataLoader worker 1", "rank 3 of 8"); empty for a
// program its command line names.
std::string role_text(const ProcessRole& role);

// The host memory of one sample in a few words: "RSS 563.0 MiB, USS 282.1 MiB, PSS 376.0 MiB".
std::string host_point_text(const HostPoint& point);

// What a site of a framework's pool (LeakSite::pool) is for, in a few words; empty for PoolOwner::None.
std::string pool_purpose(PoolOwner owner);

// Where a site's memory was made, in one line: its stack's place, or, for what gpuleak attach found held
// as it began, that.
std::string site_place(const LeakSite& site, StackFrames& stacks);

// What a site's memory is kept for: a framework's pool, else what its library's frames say
// (library_purpose); empty for the program's own.
std::string site_purpose(const LeakSite& site, StackFrames& stacks);

// "96 blocks" (a sub-allocator's, PyTorch's tensors), "3 device allocations".
std::string allocations_of(format::MemoryKind kind, uint64_t count);

// The marker interval `index` of LeakSite::marker_range: its marker's label (printable), "the start"
// before the first.
std::string marker_interval_name(const ProcessModel& model, int index);

// "`losses`, a list in __main__ with 60 items: the parameters of a Net", printable.
std::string retainer_name(const Retainer& holder);

// "under a second", "about 40 s", "about 3.5 min", "about 2.1 h", "about 4.0 days".
std::string human_duration(double seconds);

// The command as its user typed it, more or less: the program by its name ("python", not the virtual
// environment's path to it), its arguments' paths as the report shows files (short_path).
std::string short_command(const ProcessModel& model);

// How the process ended, in a word: exit, signal, exec, detached, running (no end record, and it still ran
// when the trace was opened) or killed.
const char* ended_how(const ProcessModel& model);

// Who a process is, in a line of a table of processes: its role ("rank 1 of 8"), else its short command.
std::string process_name(const ProcessModel& model);

} // namespace gpuleak::analyzer
