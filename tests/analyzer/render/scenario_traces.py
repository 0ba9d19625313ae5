"""Traces of programs run under libgpuleak.so on the simulated device, and gpuleak-report on them: what the
report tests of each format (tests/analyzer/render/*) share.

ctest sets GPULEAK_TEST_LIBRARY, GPULEAK_TEST_SIMDEVICE_DIR, GPULEAK_TEST_PROGRAMS and GPULEAK_TEST_REPORT
(the CMakeLists.txt of each test's folder); a test run without them skips.
"""

import os
import subprocess

import pytest


def setting(name):
    value = os.environ.get(name)
    if not value:
        pytest.skip("%s is not set (ctest sets it)" % name)
    return value


def traced_environment(directory, **extra):
    environment = {name: value for name, value in os.environ.items() if not name.startswith("GPULEAK_")}
    environment.update(
        LD_PRELOAD=setting("GPULEAK_TEST_LIBRARY"),
        LD_LIBRARY_PATH=setting("GPULEAK_TEST_SIMDEVICE_DIR"),
        SIMDEVICE_DIR=setting("GPULEAK_TEST_SIMDEVICE_DIR"),
        GPULEAK_OUTPUT=str(directory / "trace.%p"),
        GPULEAK_QUIET="1",
        GPULEAK_SIM_QUIET="1",
        **extra,
    )
    return environment


def traced(directory, command, returncode=0, **extra):
    """Runs `command` in `directory` under libgpuleak.so, which must end with `returncode` (a signal's:
    negative); returns the traces there."""
    completed = subprocess.run(command, env=traced_environment(directory, **extra), cwd=directory,
                               stderr=subprocess.PIPE, universal_newlines=True, timeout=120)
    assert completed.returncode == returncode, completed.stderr
    return sorted(directory.glob("trace.*"))


def report(*arguments):
    completed = subprocess.run([setting("GPULEAK_TEST_REPORT"), *map(str, arguments)], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, universal_newlines=True, timeout=120)
    assert completed.returncode == 0, completed.stderr
    return completed.stdout


def program(name):
    return os.path.join(setting("GPULEAK_TEST_PROGRAMS"), name)
