// The gpuleak Python package (python/gpuleak) for a Jupyter kernel that the launcher starts: where it is,
// found from the launcher's executable as libgpuleak.so is, and the PYTHONPATH that makes it importable
// without the user installing it.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace gpuleak::launcher {

// The directory to put on PYTHONPATH: the shared part "python" (shared_files.h) holding gpuleak/__init__.py.
// Throws LauncherError (one line) when none holds the package.
std::string find_python_package();

// The same, or nothing where none holds it: for a command that runs without it.
std::optional<std::string> python_package_if_any();

// PYTHONPATH's new value: `directory` first, then the `existing` entries, less any copy of `directory`.
std::string python_path(const std::string& directory, const std::string& existing);

} // namespace gpuleak::launcher
