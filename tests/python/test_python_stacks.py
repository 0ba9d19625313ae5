"""The recorder's Python stack walker against traceback.extract_stack(), on the interpreter running pytest.

The probe library (GPULEAK_PYTHON_PROBE) runs the walker, the code-object reader and the analyzer's
line-table decoder inside this interpreter, called through ctypes, which releases the GIL as PyTorch's
bindings do. ctest runs this file once per CPython 3.10+ under pyenv (tests/python/CMakeLists.txt).
"""

import asyncio
import importlib.util
import os
import re
import subprocess
import sys
import textwrap
import threading
import traceback
import types
from pathlib import Path

import pytest

import stack_probe
from stack_probe import capture, mismatch, probe

HERE = Path(__file__).resolve().parent

# Known nesting: each scenario returns capture() taken inside it. CAPTURE is stack_probe.capture.
SCENARIOS = textwrap.dedent(
    """\
    import asyncio

    AT_MODULE_LEVEL = CAPTURE()

    def function():
        return CAPTURE()

    class Model:
        def forward(self):
            return CAPTURE()

    def outer():
        def inner():
            return CAPTURE()
        return inner()

    square = lambda: CAPTURE()

    def generator():
        yield CAPTURE()

    async def leaf():
        await asyncio.sleep(0)
        return CAPTURE()

    async def coroutine():
        return await leaf()

    def 函数():
        return CAPTURE()
    """
)


def import_file(path, source):
    path.write_text(source, encoding="utf-8")
    spec = importlib.util.spec_from_file_location(f"scenarios_{abs(hash(str(path)))}", path)
    module = importlib.util.module_from_spec(spec)
    module.CAPTURE = capture
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def scenarios(tmp_path_factory):
    # Code points beyond the BMP make the file name a 4-byte-per-character str.
    return import_file(tmp_path_factory.mktemp("stacks") / "scenarios_模块_😀.py", SCENARIOS)


def expected_qualname(qualname):
    return qualname if sys.version_info >= (3, 11) else qualname.rsplit(".", 1)[-1]


def check(taken, qualnames):
    """The capture equals extract_stack(); the frames below capture() are the given functions."""
    captured, summary, codes = taken
    assert mismatch(captured, summary, codes) is None
    assert captured[0].qualname == "capture"
    assert [frame.qualname for frame in captured[1 : 1 + len(qualnames)]] == [
        expected_qualname(name) for name in qualnames
    ]


def test_the_walker_reads_this_interpreter():
    assert probe.gpuleak_probe_python_version() == stack_probe.PYTHON_VERSION


def test_module_level(scenarios):
    check(scenarios.AT_MODULE_LEVEL, ["<module>"])


def test_function_method_closure_and_lambda(scenarios):
    check(scenarios.function(), ["function", "test_function_method_closure_and_lambda"])
    check(scenarios.Model().forward(), ["Model.forward"])
    check(scenarios.outer(), ["outer.<locals>.inner", "outer"])
    check(scenarios.square(), ["<lambda>"])
    check(scenarios.函数(), ["函数"])


def test_generator(scenarios):
    check(next(scenarios.generator()), ["generator", "test_generator"])


def test_coroutine_driven_by_asyncio(scenarios):
    check(asyncio.run(scenarios.coroutine()), ["leaf", "coroutine"])


@pytest.mark.parametrize(
    "name",
    [
        "latin1_café.py",  # one byte per character, not ASCII
        "bmp_模块.py",  # two bytes per character
        "astral_😀.py",  # four bytes per character
        "undecodable_\udcff.py",  # a byte that is not UTF-8, as os.fsdecode gives it
    ],
)
def test_file_names_that_are_not_ascii(tmp_path, name):
    module = import_file(tmp_path / name, "def here():\n    return CAPTURE()\n")
    taken = module.here()
    check(taken, ["here"])
    assert taken[0][1].filename == str(tmp_path / name)


def test_python_threads_at_once():
    failures = []
    barrier = threading.Barrier(4)

    def nested(depth):
        return nested(depth - 1) if depth else capture()

    def run(depth):
        barrier.wait()
        for _ in range(50):
            difference = mismatch(*nested(depth))
            if difference:
                failures.append(difference)

    threads = [threading.Thread(target=run, args=(depth,)) for depth in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failures == []


def test_a_thread_that_never_ran_python_captures_nothing():
    assert probe.gpuleak_probe_count_in_native_thread() == 0


def test_deep_recursion_keeps_the_innermost_frames():
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 5000))

    def recurse(depth, limit):
        return recurse(depth - 1, limit) if depth else (capture(limit), limit)

    (captured, summary, codes), limit = recurse(1000, 64)
    assert len(summary) > 1000
    assert mismatch(captured, summary, codes, limit) is None
    assert mismatch(*recurse(1000, stack_probe.MAX_FRAMES)[0]) is None


def loop_entries_here(limit):
    return stack_probe.loop_entries(limit)


def called_back_by_c(call, limit=stack_probe.MAX_FRAMES):
    """The walker's (qualified name, loop entry) of each frame, taken inside `key`, which `call` hands to
    C code that calls it back."""
    taken = []

    def key(item):
        taken.append(loop_entries_here(limit))
        return item

    call(key)
    return taken[0]


def sort_with(key):
    sorted([0], key=key)


def map_with(key):
    list(map(key, [0]))


def expected_entries(*frames):
    """(qualified name, loop entry from 3.11) of each frame as this version has them: 3.10 runs every
    frame in an evaluation loop of its own and has no qualified names."""
    if sys.version_info >= (3, 11):
        return list(frames)
    return [(expected_qualname(name), True) for name, _ in frames]


def called_back(call):
    return [
        ("loop_entries", False),
        ("loop_entries_here", False),
        ("called_back_by_c.<locals>.key", True),  # C called it: a new evaluation loop
        (call.__name__, False),
        ("called_back_by_c", False),
    ]


@pytest.mark.parametrize("call", [sort_with, map_with])
def test_a_function_that_c_calls_back_is_a_loop_entry(call):
    entries = called_back_by_c(call)
    assert entries[:5] == expected_entries(*called_back(call))
    # Whatever started the thread's outermost frame ran it in a loop of its own.
    assert entries[-1][1]


def test_functions_called_from_python_run_in_their_caller_s_loop():
    def inner():
        return loop_entries_here(stack_probe.MAX_FRAMES)

    def generator():
        yield loop_entries_here(stack_probe.MAX_FRAMES)

    assert inner()[:3] == expected_entries(
        ("loop_entries", False),
        ("loop_entries_here", False),
        ("test_functions_called_from_python_run_in_their_caller_s_loop.<locals>.inner", False),
    )
    # next() is C: it resumes the generator in a loop of its own.
    assert next(generator())[:3] == expected_entries(
        ("loop_entries", False),
        ("loop_entries_here", False),
        ("test_functions_called_from_python_run_in_their_caller_s_loop.<locals>.generator", True),
    )


@pytest.mark.parametrize("limit", [2, 3, 4])
def test_the_outermost_frame_kept_under_a_cap_is_a_loop_entry_as_without_one(limit):
    # From 3.12 a frame is known to be a loop entry from the frame below it, which the cap leaves out.
    entries = called_back_by_c(sort_with, limit)
    assert entries == expected_entries(*called_back(sort_with)[:limit])


def code_objects(code):
    yield code
    for constant in code.co_consts:
        if isinstance(constant, types.CodeType):
            yield from code_objects(constant)


def decoded_line(code, offset):
    line = stack_probe.ctypes.c_int32()
    table = code.co_linetable
    found = probe.gpuleak_probe_line_at(
        table, len(table), code.co_firstlineno, offset, stack_probe.PYTHON_VERSION, stack_probe.ctypes.byref(line)
    )
    return line.value if found else None


def test_line_table_decoding_matches_co_lines():
    modules = [asyncio.base_events, threading, traceback, sys.modules[__name__]]
    checked = 0
    for module in modules:
        source = Path(module.__file__).read_text(encoding="utf-8")
        for code in code_objects(compile(source, module.__file__, "exec")):
            for start, end, line in code.co_lines():
                for offset in range(start, end, 2):
                    assert decoded_line(code, offset) == line, (code, offset)
                    checked += 1
            assert decoded_line(code, stack_probe.BEFORE_FIRST_INSTRUCTION) == code.co_firstlineno
    assert checked > 10000


def test_code_identity_tells_a_reused_address_apart():
    def make(index):
        namespace = {}
        exec(compile(f"def function_{index}(): pass", "<identity>", "exec"), namespace)
        return namespace[f"function_{index}"].__code__

    code = make(0)
    address = id(code)
    assert probe.gpuleak_probe_remember_code(address)
    assert probe.gpuleak_probe_is_remembered_code(address)
    del code
    kept = []
    for index in range(1, 20000):
        kept.append(make(index))
        if id(kept[-1]) == address:
            assert not probe.gpuleak_probe_is_remembered_code(address)
            return
    pytest.skip("no new code object took the freed one's address")


def run_python(*arguments, **environment):
    return subprocess.run(
        [sys.executable, *arguments],
        env={**os.environ, "PYTHONPATH": str(HERE), **environment},
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_interpreter_start_up(tmp_path):
    # sitecustomize runs while the interpreter starts, under site's and importlib's frames.
    (tmp_path / "sitecustomize.py").write_text("import stack_probe\nprint('start-up', stack_probe.mismatch_here())\n")
    run = run_python("-c", "pass", PYTHONPATH=f"{tmp_path}{os.pathsep}{HERE}")
    assert run.returncode == 0, run.stderr
    assert run.stdout == "start-up None\n"


def test_before_the_interpreter_starts():
    # Preloaded, the probe looks at the interpreter from its constructor, before Py_Initialize; the
    # walker then keeps reading the same interpreter once it runs.
    run = run_python(
        "-c",
        "import stack_probe; print(stack_probe.mismatch_here())",
        LD_PRELOAD=os.environ["GPULEAK_PYTHON_PROBE"],
        GPULEAK_PROBE_AT_LOAD="1",
    )
    assert run.returncode == 0, run.stderr
    assert run.stderr == "frames 0 innermost \n"
    assert run.stdout == "None\n"


def test_atexit_handlers():
    script = "import atexit, stack_probe\natexit.register(lambda: print('atexit', stack_probe.mismatch_here()))\n"
    run = run_python("-c", script)
    assert run.returncode == 0, run.stderr
    assert run.stdout == "atexit None\n"


FINALIZATION = """\
import ctypes, os

probe = ctypes.CDLL(os.environ["GPULEAK_PYTHON_PROBE"])
probe.gpuleak_probe_report.argtypes = [ctypes.c_int]

class Reporter:
    # Runs when the interpreter clears this module, in the middle of finalization.
    def __del__(self, report=probe.gpuleak_probe_report):
        report(2)

reporter = Reporter()
"""


def test_interpreter_finalization():
    run = run_python("-c", FINALIZATION)
    assert run.returncode == 0, run.stderr
    assert run.stderr == f"frames 1 innermost {expected_qualname('Reporter.__del__')}\n"


FINALIZING = """\
import atexit, ctypes, os

finalizing = ctypes.CDLL(os.environ["GPULEAK_PYTHON_PROBE"]).gpuleak_probe_finalizing

class Witness:
    def __del__(self, finalizing=finalizing, write=os.write):
        write(1, b"teardown %d\\n" % finalizing())

witness = Witness()
print("running", finalizing(), flush=True)
atexit.register(lambda: print("atexit", finalizing(), flush=True))
"""


def test_finalization_is_seen_from_module_teardown_and_not_before():
    # Bit 0: the runtime's word read alone; bit 1: a walk of the calling thread's stack saw it. The
    # atexit handlers run before Py_FinalizeEx marks the runtime finalizing.
    run = run_python("-c", FINALIZING)
    assert run.returncode == 0, run.stderr
    assert run.stdout == "running 0\natexit 0\nteardown 3\n"


def test_after_the_interpreter_finalized():
    script = "import ctypes, os\nctypes.CDLL(os.environ['GPULEAK_PYTHON_PROBE']).gpuleak_probe_report_at_exit()\n"
    run = run_python("-c", script)
    assert run.returncode == 0, run.stderr
    assert run.stderr == "frames 0 innermost \n"


DAEMON_THREADS = """\
import ctypes, os, threading, time

count = ctypes.CDLL(os.environ["GPULEAK_PYTHON_PROBE"]).gpuleak_probe_count

def walk():
    while True:
        count()

for _ in range(4):
    threading.Thread(target=walk, daemon=True).start()
time.sleep(0.05)
"""


def test_daemon_threads_walking_while_the_interpreter_finalizes():
    # Finalization frees the thread states of daemon threads while they are inside C calls, the GIL
    # released, walking their stacks.
    for _ in range(10):
        run = run_python("-c", DAEMON_THREADS)
        assert run.returncode == 0, run.stderr


def test_an_unsupported_python_warns_once_and_captures_nothing():
    python = os.environ.get("GPULEAK_UNSUPPORTED_PYTHON")
    if not python:
        pytest.skip("no CPython older than 3.10 under pyenv")
    script = (
        "import ctypes, os\n"
        "probe = ctypes.CDLL(os.environ['GPULEAK_PYTHON_PROBE'])\n"
        "print(probe.gpuleak_probe_count(), probe.gpuleak_probe_count(), probe.gpuleak_probe_python_version())\n"
    )
    run = subprocess.run([python, "-c", script], capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    assert run.stdout == "0 0 0\n"
    version = subprocess.run([python, "-c", "import sys; print(*sys.version_info[:2], sep='.')"], capture_output=True, text=True).stdout.strip()
    assert run.stderr == f"gpuleak: CPython {version} is not supported (3.10 to 3.14 are): allocations get native stacks only\n"
