// The launcher's kernel mode, piece by piece: the kernel's key, the cell it died in, the kernelspec,
// Jupyter's directories and the PYTHONPATH that makes the package importable.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <nlohmann/json.hpp>
#include <sys/wait.h>

#include "launcher/kernel_death.h"
#include "launcher/kernel_session.h"
#include "launcher/kernelspec.h"
#include "launcher/python_package.h"

using namespace gpuleak::launcher;
using gpuleak::analyzer::Marker;

TEST_CASE("a kernel is known by its connection file's stem") {
    CHECK(kernel_key({"python", "-m", "ipykernel_launcher", "-f", "/run/user/1/jupyter/kernel-ab12.json"},
                     7) == "kernel-ab12");
    CHECK(kernel_key({"python", "-m", "ipykernel_launcher", "--f=/tmp/kernel-cd.json"}, 7) == "kernel-cd");
    CHECK(kernel_key({"python", "-m", "ipykernel_launcher"}, 7) == "kernel-7");
    CHECK(kernel_key({"python", "-f"}, 7) == "kernel-7");
}

TEST_CASE("the cell a kernel died in is its last cell marker") {
    CHECK(cell_position({}) == "before any cell ran");
    CHECK(cell_position({{1, "cell [1]"}, {2, "end of cell [1]"}, {3, "cell [2]"}, {4, "epoch 3"}}) ==
          "while running cell [2]");
    CHECK(cell_position({{1, "cell [1]"}, {2, "end of cell [1]"}, {3, "epoch 3"}}) ==
          "after cell [1], between cells");
}

TEST_CASE("a kernel died unless it exited with 0") {
    CHECK_FALSE(kernel_died(0));             // exit 0: shut down or restarted on request
    CHECK(kernel_died(1 << 8));              // exit 1
    CHECK(kernel_died(SIGKILL));             // killed
    CHECK(kernel_died(SIGSEGV | WCOREFLAG)); // crashed
}

TEST_CASE("the kernelspec runs ipykernel under gpuleak kernel run with the extension") {
    const auto spec =
        nlohmann::json::parse(kernel_json("/opt/bin/gpuleak", "/usr/bin/python3", "Py (gpuleak)"));
    CHECK(spec["argv"] ==
          nlohmann::json({"/opt/bin/gpuleak", "kernel", "run", "--", "/usr/bin/python3", "-m",
                          "ipykernel_launcher", "--ext", "gpuleak", "-f", "{connection_file}"}));
    CHECK(spec["display_name"] == "Py (gpuleak)");
    CHECK(spec["language"] == "python");
}

TEST_CASE("kernelspecs go where jupyter_core puts them") {
    CHECK(data_directory(SpecPlace::System, "", "") == "/usr/local/share/jupyter");
    CHECK(data_directory(SpecPlace::Prefix, "/opt/env", "") == "/opt/env/share/jupyter");
    CHECK(data_directory(SpecPlace::SysPrefix, "", "/venv") == "/venv/share/jupyter");
    ::setenv("JUPYTER_DATA_DIR", "/data/jupyter", 1);
    CHECK(data_directory(SpecPlace::User, "", "") == "/data/jupyter");
    ::unsetenv("JUPYTER_DATA_DIR");
    ::setenv("HOME", "/home/me", 1);
    ::setenv("XDG_DATA_HOME", "/xdg", 1);
    CHECK(data_directory(SpecPlace::User, "", "") == "/xdg/jupyter");
    ::unsetenv("XDG_DATA_HOME");
    CHECK(data_directory(SpecPlace::User, "", "") == "/home/me/.local/share/jupyter");
    ::setenv("JUPYTER_PATH", "/a:/b/", 1);
    CHECK(kernelspec_search_path("/venv") ==
          std::vector<std::string>{"/a/kernels", "/b/kernels", "/home/me/.local/share/jupyter/kernels",
                                   "/venv/share/jupyter/kernels", "/usr/local/share/jupyter/kernels",
                                   "/usr/share/jupyter/kernels"});
    ::unsetenv("JUPYTER_PATH");
}

TEST_CASE("the package's directory goes first on PYTHONPATH, the user's entries kept") {
    CHECK(python_path("/pkg", "") == "/pkg");
    CHECK(python_path("/pkg", "/mine:/pkg:/other") == "/pkg:/mine:/other");
    CHECK(python_path("/pkg", "/mine:") == "/pkg:/mine:");
}

TEST_CASE("the kernels' state goes under XDG_STATE_HOME") {
    ::setenv("XDG_STATE_HOME", "/state", 1);
    CHECK(kernels_state_directory() == "/state/gpuleak/kernels");
    ::unsetenv("XDG_STATE_HOME");
    ::setenv("HOME", "/home/me", 1);
    CHECK(kernels_state_directory() == "/home/me/.local/state/gpuleak/kernels");
}
