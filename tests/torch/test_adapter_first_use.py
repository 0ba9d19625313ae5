"""The PyTorch adapter built at first use: `gpuleak run` on a PyTorch script with an empty adapter cache
builds the adapter for that torch before the script starts (saying so once), and the script's tensors are
recorded from that first run on; a later run builds nothing. A build that fails leaves one warning naming
its log, and the run goes on recording PyTorch's segments. `gpuleak torch-adapter` builds it on request.

Environment: that of test_workloads.py.
"""

import json
import os
import subprocess
import sys
import time

import pytest
from test_torch_adapter import CUDA_LIB_DIR, SIMDEVICE_DIR, TORCH_PYTHON, REAL_DEVICE
from test_workloads import LAUNCHER, WORKLOADS
from test_workloads import pytestmark as workload_marks
from torch_environment import simulated_device_environment

pytestmark = workload_marks
SCRIPT = os.path.join(WORKLOADS, "leak_losses_append.py")
BUILDING = "building gpuleak's PyTorch adapter for torch"


def gpuleak_run(tmp_path, cache, name, *options, **settings):
    """`gpuleak run [options] -o tmp_path/name -- python SCRIPT` with the adapter cache `cache`: the
    completed process and the script's process in the report."""
    environment = dict(
        os.environ, GPULEAK_TORCH_ADAPTER_DIR=str(cache), CXXFLAGS="-Werror", PYTHONWARNINGS="ignore", **settings
    )
    environment.pop("PYTORCH_CUDA_ALLOC_CONF", None)
    if not REAL_DEVICE:
        environment.update(simulated_device_environment(SIMDEVICE_DIR, CUDA_LIB_DIR, 4 << 30))
    directory = tmp_path / name
    completed = subprocess.run(
        [LAUNCHER, "run", *options, "-o", str(directory), "--", TORCH_PYTHON, SCRIPT],
        env=environment,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert completed.returncode == 0, completed.stderr[-4000:]
    with open(directory / "report.json") as report:
        (process,) = json.load(report)["processes"]
    return completed, process


def test_the_first_run_builds_the_adapter_and_records_tensors(tmp_path):
    cache = tmp_path / "cache"
    first, process = gpuleak_run(tmp_path, cache, "first")
    assert [line for line in first.stderr.splitlines() if BUILDING in line] == [
        f"gpuleak: {BUILDING} {torch_version()} (kept for later runs), so that each tensor is recorded"
    ]
    assert "no PyTorch adapter" not in first.stderr
    assert process["summary"]["allocator_reports_blocks"] is True
    (directory,) = cache.iterdir()
    assert [path.name for path in directory.glob("libgpuleak_torch-*.so")], "the adapter is in the cache"
    assert not list(directory.glob("build-*.log")), "a build that worked leaves no log"

    again, process = gpuleak_run(tmp_path, cache, "again")
    assert BUILDING not in again.stderr
    assert process["summary"]["allocator_reports_blocks"] is True


def test_a_failed_build_leaves_one_warning_naming_its_log(tmp_path):
    cache = tmp_path / "cache"
    completed, process = gpuleak_run(tmp_path, cache, "run", "--quiet", CXX="false")
    warnings = [line for line in completed.stderr.splitlines() if "PyTorch adapter" in line]
    assert len(warnings) == 1, completed.stderr
    (log,) = cache.glob("*/build-*.log")
    assert "could not be built" in warnings[0] and str(log) in warnings[0]
    assert log.read_text().strip(), "the log says why"
    assert process["summary"]["allocator_reports_blocks"] is False
    assert process["summary"]["devices"][0]["peak_reserved_bytes"] > 0


def test_gpuleak_torch_0_builds_nothing(tmp_path):
    cache = tmp_path / "cache"
    completed, process = gpuleak_run(tmp_path, cache, "run", GPULEAK_TORCH="0")
    assert BUILDING not in completed.stderr
    assert not cache.exists()
    assert process["summary"]["allocator_reports_blocks"] is False


def test_torch_adapter_builds_on_request_and_prints_the_path(tmp_path):
    environment = dict(os.environ, GPULEAK_TORCH_ADAPTER_DIR=str(tmp_path / "cache"))
    built = subprocess.run(
        [LAUNCHER, "torch-adapter", "--python", TORCH_PYTHON], env=environment, capture_output=True, text=True,
        timeout=300
    )
    assert built.returncode == 0, built.stderr
    (library,) = (tmp_path / "cache").glob("*/libgpuleak_torch-*.so")
    assert built.stdout == f"{library}\n"
    again = subprocess.run(
        [LAUNCHER, "torch-adapter", "--python", TORCH_PYTHON], env=environment, capture_output=True, text=True,
        timeout=300
    )
    assert (again.returncode, again.stdout, again.stderr) == (0, built.stdout, "")


def torch_version():
    return subprocess.run(
        [TORCH_PYTHON, "-c", "import torch; print(torch.__version__)"], capture_output=True, text=True, check=True
    ).stdout.strip()


def test_launchers_on_a_file_system_without_locks_both_get_the_adapter(tmp_path):
    # Lustre mounted without flock, where flock fails: two launchers of a search started together build
    # side by side, the second while the first compiles, and each gets the whole library.
    shim = tmp_path / "no_flock.so"
    source = tmp_path / "no_flock.c"
    source.write_text("#include <errno.h>\nint flock(int fd, int operation) { (void)fd; (void)operation;"
                      " errno = ENOLCK; return -1; }\n")
    subprocess.run(["cc", "-shared", "-fPIC", "-o", str(shim), str(source)], check=True)
    compiler = tmp_path / "slow-c++"
    compiler.write_text('#!/bin/sh\nsleep 3\nexec c++ "$@"\n')
    compiler.chmod(0o755)
    environment = dict(os.environ, GPULEAK_TORCH_ADAPTER_DIR=str(tmp_path / "cache"), LD_PRELOAD=str(shim),
                       CXX=str(compiler))
    command = [LAUNCHER, "torch-adapter", "--python", TORCH_PYTHON]
    first = subprocess.Popen(command, env=environment, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(1)
    second = subprocess.Popen(command, env=environment, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    outputs = [process.communicate(timeout=300) for process in (first, second)]
    assert [first.returncode, second.returncode] == [0, 0], outputs
    (library,) = (tmp_path / "cache").glob("*/libgpuleak_torch-*.so")
    assert [stdout for stdout, _ in outputs] == [f"{library}\n"] * 2


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q"]))
