"""Runs the scenarios of test_torch_adapter.py, test_workloads.py and test_adapter_first_use.py without pytest, for
scripts/gpu-validate.sh: the machine with the real GPU may have PyTorch but no pytest, and nothing can be
installed there. The scenarios themselves stay in one place, the test files; this only calls them.

Usage: scenario_runner.py [--jobs N] [NAME...]      (NAME: run only the scenarios whose name holds it)

The environment is test_torch_adapter.py's (GPULEAK_TEST_REAL_DEVICE=1 for the real device). It prints
one line per step, in the scenarios' order: "PASS name seconds", "SKIP name reason" or
"FAIL name reason"; the first step, build_adapter, builds the PyTorch adapter for that torch. Exits 1
when a step failed.
"""

import argparse
import concurrent.futures
import importlib.util
import inspect
import os
import pathlib
import sys
import tempfile
import time
import traceback
import types


class _SkipIf:
    """pytest.mark.skipif's shape as the test file uses it: in a module's pytestmark or as a decorator."""

    def __init__(self, condition, reason):
        self.condition, self.reason = bool(condition), reason

    def __call__(self, function):
        function.__dict__.setdefault("skip_marks", []).append(self)
        return function


def _parametrize(name, values):
    """pytest.mark.parametrize with one argument: the scenario runs once per value."""

    def mark(function):
        function.__dict__.setdefault("parameters", []).append((name, list(values)))
        return function

    return mark


class _Skipped(Exception):
    """pytest.skip's, raised by a scenario that finds what it needs missing."""


def _skip(reason):
    raise _Skipped(reason)


def _stand_in_pytest():
    module = types.ModuleType("pytest")
    module.skip = _skip
    module.mark = types.SimpleNamespace(
        skipif=lambda condition, reason: _SkipIf(condition, reason), parametrize=_parametrize
    )
    module.fixture = lambda *args, **kwargs: (lambda function: function)
    module.main = lambda *args, **kwargs: 2
    # What a scenario leaves out where it runs without what pytest's run installs beside it.
    module.stand_in = True
    return module


class _TempFactory:
    """tmp_path_factory's mktemp: fresh directories under one temporary root."""

    def __init__(self, root):
        self.root = root

    def mktemp(self, name):
        return pathlib.Path(tempfile.mkdtemp(prefix=f"{name}-", dir=self.root))


# The test files whose scenarios run, in this order; the first one's pytestmark and adapter_cache serve
# them all (test_workloads.py takes both from test_torch_adapter.py).
SCENARIO_FILES = ("test_torch_adapter", "test_workloads", "test_adapter_first_use")


def _load_scenarios():
    # The stand-in is used even where pytest exists, so that the marks have the one shape read below.
    sys.modules["pytest"] = _stand_in_pytest()
    modules = []
    for name in SCENARIO_FILES:
        path = os.path.join(os.path.dirname(os.path.abspath(__file__)), f"{name}.py")
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        # Registered before it runs, so that a later file importing it gets this one.
        sys.modules[name] = module
        spec.loader.exec_module(module)
        modules.append(module)
    return modules


def _reason(error):
    if isinstance(error, AssertionError):
        # The failing assertion's line and, if any, its message: enough for the table, the rest on stderr.
        frame = traceback.extract_tb(error.__traceback__)[-1]
        message = str(error).strip().splitlines()
        return f"{frame.name}, line {frame.lineno}: {frame.line}" + (f" ({message[-1][:200]})" if message else "")
    return f"{type(error).__name__}: {str(error).strip()[:200]}"


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--jobs", type=int, default=1)
    parser.add_argument("names", nargs="*")
    arguments = parser.parse_args()

    modules = _load_scenarios()
    scenarios = modules[0]
    tests = []
    for module in modules:
        for name, function in vars(module).items():
            # A scenario imported from another file is run with that file's.
            if not name.startswith("test_") or not callable(function) or function.__module__ != module.__name__:
                continue
            if arguments.names and not any(wanted in name for wanted in arguments.names):
                continue
            marks = module.pytestmark + function.__dict__.get("skip_marks", [])
            parameters = function.__dict__.get("parameters", [])
            if not parameters:
                tests.append((name, function, marks, {}))
            for parameter, values in parameters:
                tests.extend((f"{name}[{value}]", function, marks, {parameter: value}) for value in values)
    # What keeps the first file's scenarios from running keeps the adapter from being built.
    skipped = [mark.reason for mark in scenarios.pytestmark if mark.condition]
    if skipped:
        print(f"SKIP build_adapter {skipped[0]}", flush=True)
        for name, _, _, _ in tests:
            print(f"SKIP {name} {skipped[0]}", flush=True)
        return 0

    root = tempfile.mkdtemp(prefix="gpuleak-scenarios-")
    start = time.monotonic()
    try:
        adapter_cache = scenarios.adapter_cache(_TempFactory(root))
    except Exception as error:  # noqa: BLE001 (any error is the step's failure, reported as such)
        print(f"FAIL build_adapter {_reason(error)}", flush=True)
        return 1
    print(f"PASS build_adapter {time.monotonic() - start:.1f}", flush=True)

    def run(name, function, marks, keywords):
        applying = [mark for mark in marks if mark.condition]
        if applying:
            return f"SKIP {name} {applying[0].reason}"
        started = time.monotonic()
        try:
            directory = pathlib.Path(tempfile.mkdtemp(prefix=f"{function.__name__}-", dir=root))
            # The fixtures the scenario names, as pytest would pass them.
            fixtures = {"tmp_path": directory, "adapter_cache": adapter_cache}
            wanted = inspect.signature(function).parameters
            function(**{name: value for name, value in fixtures.items() if name in wanted}, **keywords)
        except _Skipped as skipped:
            return f"SKIP {name} {skipped}"
        except Exception as error:  # noqa: BLE001
            traceback.print_exc()
            return f"FAIL {name} {_reason(error)}"
        return f"PASS {name} {time.monotonic() - started:.1f}"

    # Each scenario is a subprocess of its own: threads are enough to run several at once.
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, arguments.jobs)) as pool:
        results = [pool.submit(run, *test) for test in tests]
        lines = [result.result() for result in results]
    for line in lines:
        print(line, flush=True)
    return 1 if any(line.startswith("FAIL") for line in lines) else 0


if __name__ == "__main__":
    sys.exit(main())
