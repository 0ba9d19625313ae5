// The directory of one run: every trace of it and the report. A directory holds one run only, so that
// `gpuleak-report DIR` later tells the same story as the summary.
#pragma once

#include <ctime>
#include <string>

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

// Removes the directory if the launcher created it and nothing was written into it.
void remove_if_unused(const RunDirectory& directory);

} // namespace gpuleak::launcher
