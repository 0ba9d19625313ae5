// libgpuleak.so: where it is (the GPULEAK_LIBRARY override, else found from the launcher's own
// executable in the build tree or an installed layout), and the LD_PRELOAD that loads it.
#pragma once

#include <string>
#include <vector>

namespace gpuleak::launcher {

// Where libgpuleak.so is looked for, for the launcher's executable at `executable`, most likely first:
// <build>/launcher/gpuleak next to <build>/interpose/libgpuleak.so, <prefix>/bin/gpuleak next to
// <prefix>/<libdir>/libgpuleak.so.
std::vector<std::string> library_candidates(const std::string& executable);

// The absolute path of libgpuleak.so. Throws LauncherError (one line) when it is not found or its path
// cannot go into LD_PRELOAD.
std::string find_preload_library();

// LD_PRELOAD's new value given its `existing` one: `library` first (after sanitizer runtimes, which must
// come first), then the existing entries in their order, less any other libgpuleak.so.
std::string preload_list(const std::string& library, const std::string& existing);

} // namespace gpuleak::launcher
