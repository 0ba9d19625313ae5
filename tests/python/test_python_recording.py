"""Python stacks recorded by libgpuleak.so in situations that are hard on a stack walker: several
Python threads allocating at once, a library's Python thread told by the line that started it, a thread
C++ started that never ran Python, 1000-deep recursion,
allocations while the interpreter shuts down, and Pythons the walker does not support (too old, a
debug build); and CUDA 12's runtime loaded the way Python loads libraries. Each runs a script under
LD_PRELOAD=libgpuleak.so on the simulated device and reads its trace back with gpuleak-report --format
json.

ctest runs this file once per CPython 3.10+ under pyenv (tests/python/CMakeLists.txt) with
GPULEAK_TEST_LIBRARY, GPULEAK_TEST_SIMDEVICE_DIR, GPULEAK_TEST_REPORT, GPULEAK_TEST_NATIVE_THREAD,
GPULEAK_UNSUPPORTED_PYTHON and GPULEAK_DEBUG_PYTHON naming what it needs; tests skip when those are not
set.
"""

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

MiB = 1 << 20

PRELUDE = textwrap.dedent(
    """
    import ctypes, os
    cudart = ctypes.CDLL(os.path.join(os.environ["SIMDEVICE_DIR"], "libcudart.so.13"))
    cudart.cudaMalloc.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_size_t]

    def allocate(size):
        pointer = ctypes.c_void_p()
        assert cudart.cudaMalloc(ctypes.byref(pointer), size) == 0
        return pointer.value
    """
)


def needed(name):
    value = os.environ.get(name)
    if not value:
        pytest.skip("%s is not set (ctest sets it)" % name)
    return value


# A thread of a native library's own that never ran Python (TensorFlow's executors), which allocates
# what it is asked to: tests/python's native_thread_alloc.
NATIVE_THREAD_PRELUDE = PRELUDE + textwrap.dedent(
    """
    native = ctypes.CDLL(os.environ["NATIVE_THREAD_LIBRARY"])
    native.allocate_in_native_thread.restype = ctypes.c_void_p
    native.allocate_in_native_thread.argtypes = [ctypes.c_size_t]
    """
)


def record(tmp_path, body, python=sys.executable, extra_env=None, prelude=PRELUDE):
    """Runs prelude + body under libgpuleak.so; returns (the process, its JSON report or None)."""
    script = tmp_path / "script.py"
    script.write_text(prelude + textwrap.dedent(body), encoding="utf-8")
    env = dict(os.environ)
    env.update(
        LD_PRELOAD=needed("GPULEAK_TEST_LIBRARY"),
        SIMDEVICE_DIR=needed("GPULEAK_TEST_SIMDEVICE_DIR"),
        GPULEAK_OUTPUT=str(tmp_path / "trace.%p"),
        GPULEAK_QUIET="1",
        GPULEAK_SIM_QUIET="1",
    )
    env.update(extra_env or {})
    process = subprocess.run([python, str(script)], env=env, capture_output=True, text=True, timeout=120)
    traces = sorted(tmp_path.glob("trace.*"))
    if not traces:
        return process, None
    report = subprocess.run(
        [needed("GPULEAK_TEST_REPORT"), "--format", "json", "--top", "50", str(traces[0])],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert report.returncode == 0, report.stderr
    return process, json.loads(report.stdout)


def record_with_native_thread(tmp_path, body):
    """record(), with `native` (NATIVE_THREAD_PRELUDE) for the body to call."""
    library = needed("GPULEAK_TEST_NATIVE_THREAD")
    return record(tmp_path, body, extra_env={"NATIVE_THREAD_LIBRARY": library}, prelude=NATIVE_THREAD_PRELUDE)


def leak_sites(report):
    (process,) = report["processes"]
    return process["leaks"]


def python_frames(site):
    return [frame for frame in site["frames"] if frame.get("python")]


def test_python_threads_allocating_at_once_each_get_their_own_stack(tmp_path):
    process, report = record(
        tmp_path,
        """
        import threading
        barrier = threading.Barrier(4)
        def worker_0(): barrier.wait(); [allocate(1 << 20) for _ in range(50)]
        def worker_1(): barrier.wait(); [allocate(1 << 20) for _ in range(50)]
        def worker_2(): barrier.wait(); [allocate(1 << 20) for _ in range(50)]
        def worker_3(): barrier.wait(); [allocate(1 << 20) for _ in range(50)]
        threads = [threading.Thread(target=f) for f in (worker_0, worker_1, worker_2, worker_3)]
        for thread in threads: thread.start()
        for thread in threads: thread.join()
        """,
    )
    assert process.returncode == 0, process.stderr
    for index in range(4):
        callers = [
            s for s in leak_sites(report) if any(f["function"].endswith("worker_%d" % index) for f in python_frames(s))
        ]
        assert callers, "worker_%d's allocations are not attributed to it" % index
        assert sum(s["bytes"] for s in callers) == 50 * MiB
        assert all(python_frames(s)[0]["function"].split(".")[-1] == "allocate" for s in callers)


# A library's prefetching thread, as PyTorch's pin-memory thread is: started by the library for the
# program, running only the library's code.
PREFETCHER = """
import ctypes, os, threading

cudart = ctypes.CDLL(os.path.join(os.environ["SIMDEVICE_DIR"], "libcudart.so.13"))
cudart.cudaMalloc.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_size_t]

class Prefetcher:
    def __init__(self, count):
        self.thread = threading.Thread(target=self._run, args=(count,))
        self.thread.start()

    def _run(self, count):
        self.made = [ctypes.c_void_p() for _ in range(count)]
        for pointer in self.made:
            assert cudart.cudaMalloc(ctypes.byref(pointer), 1 << 20) == 0
"""


@pytest.mark.parametrize("cuda_before", [True, False], ids=["cuda-used-before", "cuda-first-used-by-the-thread"])
def test_what_a_librarys_thread_made_is_named_by_the_line_that_started_it(tmp_path, cuda_before):
    library = tmp_path / "site-packages"
    library.mkdir()
    (library / "prefetch.py").write_text(PREFETCHER, encoding="utf-8")
    process, report = record(
        tmp_path,
        """
        import sys
        sys.path.insert(0, os.path.join(os.path.dirname(__file__), "site-packages"))
        import prefetch
        kept = allocate(1 << 20) if %s else None
        loader = prefetch.Prefetcher(6)   # the program's line
        loader.thread.join()
        """
        % cuda_before,
    )
    assert process.returncode == 0, process.stderr
    (site,) = [s for s in leak_sites(report) if s["bytes"] == 6 * MiB]
    line = next(i for i, text in enumerate((tmp_path / "script.py").read_text().splitlines(), 1) if "program's line" in text)
    assert site["where"].startswith("%s:%d in <module> (made there on a library's thread, in " % (tmp_path / "script.py", line)), site["where"]
    # The package and the function its thread ran (3.10 has no qualified names).
    assert site["where"].endswith(("in prefetch Prefetcher._run)", "in prefetch _run)")), site["where"]
    started = [frame for frame in site["thread_started_at"] if frame["python"]]
    assert started[0]["file"].endswith("/threading.py")
    assert [(frame["file"], frame["line"]) for frame in started if frame["program"]] == [(str(tmp_path / "script.py"), line)]


def test_a_thread_the_program_runs_is_named_by_its_own_line(tmp_path):
    process, report = record(
        tmp_path,
        """
        import threading
        def work():
            global made
            made = allocate(2 << 20)   # the thread's line
        thread = threading.Thread(target=work)
        thread.start()
        thread.join()
        """,
    )
    assert process.returncode == 0, process.stderr
    (site,) = [s for s in leak_sites(report) if s["bytes"] == 2 * MiB]
    assert site["where"].endswith(" in allocate"), site["where"]
    assert [frame["function"] for frame in site["thread_started_at"] if frame.get("program")] == ["<module>"]


def test_a_thread_pools_worker_is_not_named_by_where_it_was_started(tmp_path):
    process, report = record(
        tmp_path,
        """
        from concurrent.futures import ThreadPoolExecutor
        with ThreadPoolExecutor(max_workers=1) as pool:
            made = pool.submit(cudart.cudaMalloc, ctypes.byref(ctypes.c_void_p()), 4 << 20).result()
        assert made == 0
        """,
    )
    assert process.returncode == 0, process.stderr
    (site,) = [s for s in leak_sites(report) if s["bytes"] == 4 * MiB]
    assert site["thread_started_at"] is None
    assert "started there" not in site["where"]


def test_a_thread_that_never_ran_python_makes_memory_for_the_line_that_waits_on_it(tmp_path):
    # As TensorFlow's executors make a compiled step's tensors while the program waits in model.fit.
    process, report = record_with_native_thread(
        tmp_path,
        """
        def train_step():
            return native.allocate_in_native_thread(3 << 20)
        assert train_step()
        """,
    )
    assert process.returncode == 0, process.stderr
    (site,) = [s for s in leak_sites(report) if s["bytes"] == 3 * MiB]
    assert [frame["function"] for frame in python_frames(site)] == ["train_step", "<module>"]
    # Its own native frames stay: the thread's.
    assert [frame for frame in site["frames"] if not frame.get("python")]
    # A native thread serves whatever asks it later: where it was started is not told.
    assert site["thread_started_at"] is None


def test_with_two_python_threads_a_native_thread_keeps_a_native_stack(tmp_path):
    # Which of them waits on it is not known.
    process, report = record_with_native_thread(
        tmp_path,
        """
        import threading
        other = threading.Event()
        waiting = threading.Thread(target=other.wait)
        waiting.start()
        assert native.allocate_in_native_thread(3 << 20)
        other.set()
        waiting.join()
        """,
    )
    assert process.returncode == 0, process.stderr
    (site,) = [s for s in leak_sites(report) if s["bytes"] == 3 * MiB]
    assert python_frames(site) == []
    assert site["frames"]


def test_deep_recursion_keeps_the_innermost_frames(tmp_path):
    process, report = record(
        tmp_path,
        """
        import sys
        sys.setrecursionlimit(5000)
        def descend(depth):
            if depth == 0:
                return allocate(5 << 20)
            return descend(depth - 1)
        descend(1000)
        """,
    )
    assert process.returncode == 0, process.stderr
    (site,) = [s for s in leak_sites(report) if s["bytes"] == 5 * MiB]
    frames = python_frames(site)
    assert frames[0]["function"].split(".")[-1] == "allocate"
    # GPULEAK_STACK_DEPTH (64 by default) caps the Python frames too: the innermost are kept.
    assert 0 < len(frames) <= 64
    assert all(frame["function"].split(".")[-1] == "descend" for frame in frames[1:])


def test_code_objects_made_and_freed_at_one_address_keep_their_own_file_and_line(tmp_path):
    # A notebook's cells: each run compiles a new code object, which the last one's freed memory often
    # holds, and runs it from the same place; the names stay alive (IPython's linecache keeps them).
    process, report = record(
        tmp_path,
        """
        names, addresses = [], []
        for index in range(40):
            names.append("<cell %d>" % index)
            code = compile("\\n" * (index % 5) + "allocate(%d)" % ((index + 1) << 16), names[-1], "exec")
            addresses.append(id(code))
            exec(code, {"allocate": allocate})
            del code
        assert len(set(addresses)) < len(addresses), "no code object took a freed one's address"
        """,
    )
    assert process.returncode == 0, process.stderr
    sites = leak_sites(report)
    for index in range(40):
        (site,) = [s for s in sites if s["bytes"] == (index + 1) << 16]
        frames = python_frames(site)
        assert frames[0]["function"].split(".")[-1] == "allocate"
        assert (frames[1]["file"], frames[1]["line"]) == ("<cell %d>" % index, index % 5 + 1)


def test_allocations_during_interpreter_shutdown_are_recorded(tmp_path):
    process, report = record(
        tmp_path,
        """
        import atexit
        def at_exit():
            allocate(7 << 20)
        atexit.register(at_exit)
        """,
    )
    assert process.returncode == 0, process.stderr
    (site,) = [s for s in leak_sites(report) if s["bytes"] == 7 * MiB]
    functions = [frame["function"].split(".")[-1] for frame in python_frames(site)]
    assert functions[:2] == ["allocate", "at_exit"]


def test_cuda_12s_runtime_in_a_scope_of_its_own_charges_the_device_selected(tmp_path):
    # ctypes loads libraries RTLD_LOCAL, as Python loads the extension modules that bring CUDA 12's
    # runtime in most installs: gpuleak finds that runtime by its soname to ask it for the device.
    process, report = record(
        tmp_path,
        """
        import ctypes, os
        cudart = ctypes.CDLL(os.path.join(os.environ["SIMDEVICE_DIR"], "libcudart.so.12"))
        assert cudart.cudaSetDevice(1) == 0
        pointer = ctypes.c_void_p()
        assert cudart.cudaMalloc(ctypes.byref(pointer), ctypes.c_size_t(11 << 20)) == 0
        """,
        extra_env={"GPULEAK_SIM_DEVICES": "2"},
        prelude="",
    )
    assert process.returncode == 0, process.stderr
    (process_report,) = report["processes"]
    devices = process_report["summary"]["devices"]
    assert [(d["device"], d["final_allocated_bytes"]) for d in devices] == [(1, 11 * MiB)]


def assert_native_stacks_and_one_warning(process, report, why):
    """A Python the walker leaves alone: the program runs, gpuleak says why once, and the 9 MiB it
    allocated has its native stack and no Python frames."""
    assert process.returncode == 0, process.stderr
    warnings = [line for line in process.stderr.splitlines() if line.startswith("gpuleak:")]
    assert len(warnings) == 1 and why in warnings[0], process.stderr
    (site,) = [s for s in leak_sites(report) if s["bytes"] == 9 * MiB]
    assert python_frames(site) == []
    assert site["frames"]


def test_an_unsupported_python_gets_native_stacks_and_one_warning(tmp_path):
    python = needed("GPULEAK_UNSUPPORTED_PYTHON")
    process, report = record(tmp_path, "allocate(9 << 20)\n", python=python)
    assert_native_stacks_and_one_warning(process, report, "not supported")


def test_a_debug_build_gets_native_stacks_and_one_warning(tmp_path):
    python = needed("GPULEAK_DEBUG_PYTHON")
    process, report = record(tmp_path, "allocate(9 << 20)\nprint('done')\n", python=python)
    assert_native_stacks_and_one_warning(process, report, "is a debug build")
    assert process.stdout == "done\n"


# A leak made over a short time, then a long finalization: module teardown runs an object's __del__ that
# takes 2 s, as the shutdown of a large library can. Growth is judged on the events before finalization.
SLOW_TEARDOWN = """
import time
cudart.cudaFree.argtypes = [ctypes.c_void_p]
held = []
for _ in range(6):
    scratch = allocate(4 << 20)  # each step works in scratch memory, and keeps 2 MiB
    held.append(allocate(2 << 20))
    assert cudart.cudaFree(scratch) == 0
    time.sleep(0.05)

class SlowTeardown:
    # Teardown may have cleared the module's globals by the time this runs: it keeps what it needs.
    def __del__(self, sleep=time.sleep, allocate=allocate, allocate_too=ALLOCATE_AT_TEARDOWN):
        if allocate_too:
            allocate(1 << 20)
        sleep(2)

slow_teardown = SlowTeardown()
"""


def check_leak_before_slow_finalization(report):
    (process,) = report["processes"]
    finalizing = process.get("python_finalizing_s")
    assert finalizing is not None, "no PythonFinalizing record"
    assert process["duration_s"] - finalizing >= 1.5
    (site,) = [s for s in process["leaks"] if s["bytes"] == 12 * MiB]
    assert site["growing"]
    assert site["last_s"] <= finalizing
    assert process["diagnosis"]["kind"] == "leak", process["diagnosis"]["text"]


def test_a_leak_before_a_slow_finalization_is_growing_seen_by_the_sampler(tmp_path):
    # Nothing is allocated while finalizing: the sampler's thread sees it.
    process, report = record(tmp_path, "ALLOCATE_AT_TEARDOWN = False\n" + SLOW_TEARDOWN)
    assert process.returncode == 0, process.stderr
    check_leak_before_slow_finalization(report)


def test_a_leak_before_a_slow_finalization_is_growing_seen_by_an_allocation(tmp_path):
    # The sampler sleeps through the run: the walk at the allocation in __del__ sees it.
    process, report = record(
        tmp_path, "ALLOCATE_AT_TEARDOWN = True\n" + SLOW_TEARDOWN, extra_env={"GPULEAK_SAMPLE_MS": "60000"}
    )
    assert process.returncode == 0, process.stderr
    check_leak_before_slow_finalization(report)
    (process_report,) = report["processes"]
    (teardown,) = [s for s in process_report["leaks"] if s["bytes"] == 1 * MiB]
    # Recorded when that allocation's walk saw it, just before the allocation itself.
    assert 0 <= teardown["first_s"] - process_report["python_finalizing_s"] < 0.5


def test_without_python_stacks_finalization_is_not_read(tmp_path):
    process, report = record(
        tmp_path, "ALLOCATE_AT_TEARDOWN = True\n" + SLOW_TEARDOWN.replace("sleep(2)", "pass"),
        extra_env={"GPULEAK_PYTHON": "0"},
    )
    assert process.returncode == 0, process.stderr
    (process_report,) = report["processes"]
    assert "python_finalizing_s" not in process_report


def test_the_exception_a_program_ended_with_is_recorded_with_the_line_it_came_from(tmp_path):
    process, report = record(
        tmp_path,
        """
        held = allocate(1 << 20)
        def check(batch):
            raise ValueError("batch %d has no labels\\nsee the data" % batch)
        check(3)
        """,
    )
    assert process.returncode == 1 and "ValueError: batch 3 has no labels" in process.stderr
    (traced,) = report["processes"]
    error = traced["error"]
    assert error["type"] == "ValueError"
    assert error["message"] == "batch 3 has no labels\nsee the data"
    script = str(tmp_path / "script.py")
    lines = (tmp_path / "script.py").read_text().splitlines()
    assert [(frame["file"], lines[frame["line"] - 1].strip()) for frame in error["frames"]] == [
        (script, "check(3)"),
        (script, 'raise ValueError("batch %d has no labels\\nsee the data" % batch)'),
    ]
    assert error["program_frame"] == 1 and error["frames"][1]["function"] == "check"
    assert error["text"].startswith("ValueError: batch 3 has no labels see the data, at %s:" % script)


def test_a_program_that_caught_its_exceptions_or_called_sys_exit_ended_with_none(tmp_path):
    # The code module, like a test runner, leaves the exception it caught in sys.last_value.
    process, report = record(
        tmp_path,
        """
        import code, sys
        held = allocate(1 << 20)
        try:
            raise KeyError("caught")
        except KeyError:
            pass
        code.InteractiveInterpreter().runsource("1 / 0")
        assert isinstance(sys.last_value, ZeroDivisionError)
        sys.exit(2)
        """,
    )
    assert process.returncode == 2, process.stderr
    (traced,) = report["processes"]
    assert traced["error"] is None


def test_the_search_at_exit_still_says_what_went_wrong_once(tmp_path):
    # A package whose search fails: recording the program's exception before it takes nothing of its say.
    package = tmp_path / "package" / "gpuleak"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "_why.py").write_text("def at_exit():\n    raise RuntimeError('the search broke')\n")
    process, _ = record(
        tmp_path,
        """
        held = allocate(1 << 20)
        raise ValueError("the program's own error")
        """,
        extra_env={"GPULEAK_PYTHON_PACKAGE": str(tmp_path / "package")},
    )
    assert process.returncode == 1
    assert (
        "gpuleak: what held the memory at the program's exit was not found: RuntimeError: the search broke"
        in process.stderr
    ), process.stderr
