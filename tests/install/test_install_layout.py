"""`cmake --install` of the build into a prefix of its own: the layout the launcher expects, and gpuleak run
from it with no build tree on any path (the simulated device aside, which is the test's, not gpuleak's).

Environment (ctest sets it): GPULEAK_TEST_BUILD_DIR, GPULEAK_TEST_CMAKE, GPULEAK_TEST_SIMDEVICE_DIR,
GPULEAK_TEST_PROGRAMS, GPULEAK_TEST_DUMP.
"""

import json
import os
import subprocess
import sys

import pytest


def setting(name):
    value = os.environ.get(name)
    if not value:
        pytest.skip("%s is not set (ctest sets it)" % name)
    return value


@pytest.fixture(scope="module")
def prefix(tmp_path_factory):
    prefix = tmp_path_factory.mktemp("install") / "prefix"
    subprocess.run([setting("GPULEAK_TEST_CMAKE"), "--install", setting("GPULEAK_TEST_BUILD_DIR"), "--prefix",
                    str(prefix)], check=True, stdout=subprocess.DEVNULL)
    return prefix


def library_of(prefix):
    (library,) = [path for path in prefix.rglob("libgpuleak.so")]
    return library


def gpuleak_run(prefix, output, command):
    """`PREFIX/bin/gpuleak run` of `command`, in an environment without gpuleak's variables or paths."""
    environment = {name: value for name, value in os.environ.items()
                   if not name.startswith("GPULEAK_") and name not in ("LD_PRELOAD", "PYTHONPATH")}
    environment["LD_LIBRARY_PATH"] = setting("GPULEAK_TEST_SIMDEVICE_DIR")
    environment["GPULEAK_SIM_QUIET"] = "1"
    return subprocess.run([str(prefix / "bin" / "gpuleak"), "run", "--quiet", "-o", str(output), "--", *command],
                          env=environment, capture_output=True, text=True, timeout=120)


def test_the_prefix_holds_the_programs_the_library_the_python_package_and_the_adapters_source(prefix):
    for program in ("gpuleak", "gpuleak-report"):
        assert os.access(prefix / "bin" / program, os.X_OK), program
    library = library_of(prefix)
    assert library.parent.parent == prefix  # <prefix>/<libdir>, the libdir one level down
    share = prefix / "share" / "gpuleak"
    assert (share / "python" / "gpuleak" / "__init__.py").is_file()
    assert (share / "python" / "gpuleak" / "_why" / "__init__.py").is_file()
    assert not list(share.rglob("__pycache__"))
    assert os.access(share / "torch_adapter" / "build-adapter.sh", os.X_OK)
    assert (share / "torch_adapter" / "gpuleak_torch_adapter.cpp").is_file()
    # build-adapter.sh compiles against ../include.
    assert (share / "include" / "gpuleak" / "gpuleak.h").is_file()


def test_gpuleak_run_from_the_prefix_records_with_the_prefixs_library_and_reports(prefix, tmp_path):
    program = os.path.join(setting("GPULEAK_TEST_PROGRAMS"), "scenario_leak")
    run = gpuleak_run(prefix, tmp_path / "run", [program, "20"])
    assert run.returncode == 0, run.stderr
    with open(tmp_path / "run" / "report.json") as report:
        (process,) = json.load(report)["processes"]
    assert process["diagnosis"]["kind"] == "leak"
    (trace,) = [path for path in (tmp_path / "run").iterdir() if ".trace" in path.name or path.name.startswith("gpuleak.")]
    dumped = json.loads(subprocess.run([setting("GPULEAK_TEST_DUMP"), "--json", str(trace)], check=True,
                                       capture_output=True, text=True).stdout)
    modules = [module["path"] for module in dumped["modules"]]
    assert str(library_of(prefix)) in modules
    assert not [path for path in modules if path.startswith(setting("GPULEAK_TEST_BUILD_DIR") + "/interpose")]
    # The prefix's gpuleak-report reads it as the launcher's report did.
    report = subprocess.run([str(prefix / "bin" / "gpuleak-report"), "--format", "json", str(tmp_path / "run")],
                            check=True, capture_output=True, text=True)
    (again,) = json.loads(report.stdout)["processes"]
    assert again["diagnosis"]["kind"] == "leak"


def test_a_python_program_run_from_the_prefix_is_given_the_prefixs_package(prefix, tmp_path):
    run = gpuleak_run(prefix, tmp_path / "run",
                      [sys.executable, "-c", "import os; print(os.environ['GPULEAK_PYTHON_PACKAGE'])"])
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == str(prefix / "share" / "gpuleak" / "python")
