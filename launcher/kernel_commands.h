// `gpuleak kernel install|list|uninstall`: what each prints, on top of kernelspec.h. Each returns the
// launcher's exit status and throws LauncherError (one line) for what the user must fix.
#pragma once

#include <string>

#include "launcher/kernelspec.h"

namespace gpuleak::launcher {

int kernel_install(const KernelInstallRequest& request);

// `python` (may be empty: python3 on PATH, when there is one) adds its sys.prefix to the search.
int kernel_list(const std::string& python);

int kernel_uninstall(const std::string& name, const std::string& python);

} // namespace gpuleak::launcher
