"""gpuleak-report's Python frames against traceback.extract_stack(), end to end, on this interpreter.

A script with known nesting (module level, a function, a method, a nested closure, a lambda, a
generator, a coroutine under asyncio, a function in a file whose name is not ASCII, a loop that keeps
what it allocates, functions that C code calls back: sorted()'s key and a ctypes callback that qsort
calls, and an __init__ called often enough to be specialized) runs under LD_PRELOAD=libgpuleak.so on the simulated device. Each scenario leaks one
cudaMalloc made through ctypes, which releases the GIL, and writes down traceback.extract_stack() taken
on the line of that call, with each frame's qualified name. gpuleak-report must show each leak's Python
frames as exactly those frames, innermost first: file, line, function; with --native, each after the
evaluation loop that ran it.

ctest runs this file once per CPython 3.10+ under pyenv (tests/python/CMakeLists.txt) with
GPULEAK_TEST_LIBRARY, GPULEAK_TEST_SIMDEVICE_DIR and GPULEAK_TEST_REPORT naming the build's files; the
tests skip when they are not set.
"""

import json
import os
import re
import subprocess
import sys
import textwrap

import pytest

MiB = 1 << 20
LOOP_ROUNDS = 5

SCRIPT = textwrap.dedent(
    """\
    import asyncio, ctypes, importlib.util, json, os, sys, time, traceback

    cudart = ctypes.CDLL(os.path.join(os.environ["SIMDEVICE_DIR"], "libcudart.so.13"))
    cudart.cudaMalloc.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_size_t]
    cudart.cudaMalloc.restype = ctypes.c_int
    MiB = 1 << 20
    expected = {}

    def leak(scenario, size):
        pointer = ctypes.c_void_p()
        # One line: the stack taken and the allocation made are at the same instruction's line.
        stack, status = traceback.extract_stack(), cudart.cudaMalloc(ctypes.byref(pointer), size)
        assert status == 0, status
        qualnames, frame = [], sys._getframe()
        while frame is not None:
            qualnames.append(getattr(frame.f_code, "co_qualname", frame.f_code.co_name))
            frame = frame.f_back
        frames = [[entry.filename, entry.lineno, entry.name] for entry in reversed(stack)]
        entry = expected.setdefault(scenario, {"bytes": 0})
        entry.update(bytes=entry["bytes"] + size, frames=frames, qualnames=qualnames)

    leak("module", 1 * MiB)

    def function():
        leak("function", 2 * MiB)

    class Model:
        def forward(self):
            leak("method", 3 * MiB)

    def outer():
        def inner():
            leak("closure", 4 * MiB)
        inner()

    square = lambda: leak("lambda", 5 * MiB)

    def generator():
        yield leak("generator", 6 * MiB)

    async def leaf():
        await asyncio.sleep(0)
        leak("coroutine", 7 * MiB)

    async def coroutine():
        await leaf()

    # C code that calls back into Python: sorted() calls key, qsort (through ctypes) calls compare.
    def helper():
        leak("callback", 9 * MiB)

    def key(item):
        helper()
        return item

    def sort_with_key():
        sorted([0], key=key)

    COMPARE = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(ctypes.c_int), ctypes.POINTER(ctypes.c_int))
    libc = ctypes.CDLL(None)
    libc.qsort.argtypes = [ctypes.POINTER(ctypes.c_int), ctypes.c_size_t, ctypes.c_size_t, COMPARE]
    libc.qsort.restype = None
    compared = []

    def compare(a, b):
        if not compared:
            compared.append(leak("ctypes_callback", 10 * MiB))
        return a[0] - b[0]

    def sort_in_c():
        items = (ctypes.c_int * 2)(2, 1)
        libc.qsort(items, len(items), ctypes.sizeof(ctypes.c_int), COMPARE(compare))

    # Called often enough to be specialized: 3.13 then calls __init__ through a shim frame of its own.
    class Layer:
        def __init__(self, last):
            if last:
                leak("warm_init", 11 * MiB)

    def build_layers():
        for index in range(200):
            Layer(index == 199)

    cudart.cudaFree.argtypes = [ctypes.c_void_p]

    def step():
        scratch = ctypes.c_void_p()
        assert cudart.cudaMalloc(ctypes.byref(scratch), MiB) == 0
        assert cudart.cudaFree(scratch) == 0

    def keep_history(rounds):
        for _ in range(rounds):
            step()  # each round works in scratch memory, and keeps 16 MiB
            leak("loop", 16 * MiB)
            time.sleep(0.2)

    function()
    Model().forward()
    outer()
    square()
    next(generator())
    asyncio.run(coroutine())
    sort_with_key()
    sort_in_c()
    build_layers()

    directory = os.path.dirname(sys.argv[1])
    path = os.path.join(directory, "модуль_模块_😀.py")
    with open(path, "w", encoding="utf-8") as source:
        source.write("def 函数(leak):\\n    leak('non_ascii', 8 * (1 << 20))\\n")
    spec = importlib.util.spec_from_file_location("non_ascii_module", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.函数(leak)

    keep_history(int(sys.argv[2]))

    with open(sys.argv[1], "w", encoding="utf-8") as out:
        json.dump(expected, out)
    """
)

SCENARIOS = {
    "module": ["<module>"],
    "function": ["function", "<module>"],
    "method": ["Model.forward", "<module>"],
    "closure": ["outer.<locals>.inner", "outer", "<module>"],
    "lambda": ["<lambda>", "<module>"],
    "generator": ["generator", "<module>"],
    "coroutine": ["leaf", "coroutine"],
    "non_ascii": ["函数", "<module>"],
    "loop": ["keep_history", "<module>"],
    "callback": ["helper", "key", "sort_with_key", "<module>"],
    "ctypes_callback": ["compare", "sort_in_c", "<module>"],
    "warm_init": ["Layer.__init__", "build_layers", "<module>"],
}

# From 3.11, how many Python frames, innermost first, each evaluation loop of a scenario ran: a loop
# starts where C code calls Python (next(), sorted()'s key, a ctypes callback). The coroutine's depend on
# how far the interpreter has specialized asyncio's code. On 3.10 each frame has a loop of its own.
RUNS_FROM_3_11 = {
    "module": [2],
    "function": [3],
    "method": [3],
    "closure": [4],
    "lambda": [3],
    "generator": [2, 1],
    "coroutine": None,
    "non_ascii": [3],
    "loop": [3],
    "callback": [3, 2],
    "ctypes_callback": [2, 2],
    # type.__call__ runs __init__ in a loop of its own, until 3.13 specializes the call to run it inline.
    "warm_init": [2, 2] if sys.version_info < (3, 13) else [4],
}


def build_file(name):
    value = os.environ.get(name)
    if not value:
        pytest.skip("%s is not set (ctest sets it)" % name)
    return value


def run_report(trace, *options):
    return run_report_args(*options, str(trace))


def run_report_args(*arguments):
    completed = subprocess.run(
        [build_file("GPULEAK_TEST_REPORT"), *arguments],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        universal_newlines=True,
        encoding="utf-8",
        timeout=120,
    )
    assert completed.returncode == 0, completed.stderr
    return completed.stdout


def recording_environment(directory, **extra):
    """This environment under libgpuleak.so on the simulated device, its traces in `directory`."""
    environment = {name: value for name, value in os.environ.items() if not name.startswith("GPULEAK_")}
    environment.update(
        LD_PRELOAD=build_file("GPULEAK_TEST_LIBRARY"),
        SIMDEVICE_DIR=build_file("GPULEAK_TEST_SIMDEVICE_DIR"),
        GPULEAK_OUTPUT=str(directory / "trace.%p"),
        GPULEAK_QUIET="1",
        GPULEAK_SIM_QUIET="1",
        **extra,
    )
    return environment


def run_scenarios(script, result, rounds, trace_directory, **extra):
    """Runs SCRIPT from its directory, the expected stacks to `result`; returns its trace."""
    completed = subprocess.run(
        [sys.executable, str(script), str(result), str(rounds)],
        env=recording_environment(trace_directory, PYTHONIOENCODING="utf-8", **extra),
        cwd=script.parent,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        universal_newlines=True,
        timeout=120,
    )
    assert completed.returncode == 0, completed.stderr
    (trace,) = trace_directory.glob("trace.*")
    return trace


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    directory = tmp_path_factory.mktemp("report_python_stacks")
    script = directory / "scenarios.py"
    script.write_text(SCRIPT, encoding="utf-8")
    result = directory / "expected.json"
    build_file("GPULEAK_TEST_REPORT")
    # Native frames deep enough to reach every evaluation loop.
    trace = run_scenarios(script, result, LOOP_ROUNDS, directory, GPULEAK_STACK_DEPTH="256")
    expected = json.loads(result.read_text(encoding="utf-8"))
    assert sorted(expected) == sorted(SCENARIOS)
    return trace, expected


def process_of(report):
    (process,) = json.loads(report)["processes"]
    return process


def site_of(process, entry):
    sites = [site for site in process["leaks"] if site["bytes"] == entry["bytes"]]
    assert len(sites) == 1, [site["bytes"] for site in process["leaks"]]
    return sites[0]


def python_frames(site):
    return [frame for frame in site["frames"] if frame["python"]]


def test_every_leak_shows_the_python_stack_taken_at_its_call(recorded):
    trace, expected = recorded
    process = process_of(run_report(trace, "--format", "json", "--top", "100", "--stack-depth", "1024"))
    assert process["warnings"] == []
    for scenario, entry in expected.items():
        frames = python_frames(site_of(process, entry))
        wanted = entry["frames"]
        assert len(frames) == len(wanted), (scenario, frames, wanted)
        for index, (frame, (filename, line, name), qualname) in enumerate(zip(frames, wanted, entry["qualnames"])):
            where = (scenario, index, frame, filename, line, name)
            assert frame["file"] == filename, where
            assert frame["line"] == line, where
            # co_qualname from 3.11; 3.10 has only co_name, which extract_stack() gives everywhere.
            assert frame["function"] == qualname, where
            assert frame["function"].rsplit(".", 1)[-1] == name, where
            assert frame["module"] == "" and frame["module_offset"] == 0, where


def test_the_scenarios_nest_as_written(recorded):
    _, expected = recorded
    for scenario, callers in SCENARIOS.items():
        qualnames = expected[scenario]["qualnames"]
        wanted = callers if sys.version_info >= (3, 11) else [name.rsplit(".", 1)[-1] for name in callers]
        assert qualnames[0] == "leak"
        assert qualnames[1 : 1 + len(wanted)] == wanted, scenario
    assert expected["non_ascii"]["frames"][0][0].endswith("scenarios.py")
    assert expected["non_ascii"]["frames"][1][0].endswith("модуль_模块_😀.py")


def test_a_line_reached_again_and_again_is_one_growing_site(recorded):
    trace, expected = recorded
    process = process_of(run_report(trace, "--format", "json", "--top", "100"))
    site = site_of(process, expected["loop"])
    assert site["count"] == LOOP_ROUNDS and site["growing"]
    assert process["diagnosis"]["kind"] == "leak"


def test_native_frames_between_python_frames_are_left_out_by_default(recorded):
    trace, expected = recorded
    process = process_of(run_report(trace, "--format", "json", "--top", "100", "--stack-depth", "1024"))
    for scenario, entry in expected.items():
        frames = site_of(process, entry)["frames"]
        first = next(index for index, frame in enumerate(frames) if frame["python"])
        assert first > 0, "the native frames that made the call come first"
        assert all(frame["python"] for frame in frames[first:]), scenario
        assert all(not frame["function"].startswith("_PyEval") for frame in frames[:first]), scenario


def is_evaluation_loop(frame):
    function = frame["function"]
    return not frame["python"] and (
        function == "_PyEval_EvalFrameDefault" or function.startswith("_PyEval_EvalFrameDefault.")
    )


def runs_after_loops(frames):
    """The functions of the Python frames after each evaluation loop, innermost first."""
    runs = []
    for index, frame in enumerate(frames):
        if is_evaluation_loop(frame):
            runs.append([])
        elif frame["python"]:
            before = frames[index - 1]
            assert before["python"] or is_evaluation_loop(before), index
            runs[-1].append(frame["function"])
    return runs


def between(frames, inner, outer):
    """The native frames between the Python frames of functions `inner` and `outer`."""
    functions = [frame["function"] if frame["python"] else None for frame in frames]
    return frames[functions.index(inner) + 1 : functions.index(outer)]


def test_native_shows_every_frame_with_the_python_frames_at_the_evaluation_loops_that_ran_them(recorded):
    trace, expected = recorded
    default = process_of(run_report(trace, "--format", "json", "--top", "100", "--stack-depth", "1024"))
    native = process_of(run_report(trace, "--format", "json", "--top", "100", "--stack-depth", "1024", "--native"))
    for scenario, entry in expected.items():
        frames = site_of(native, entry)["frames"]
        assert python_frames(site_of(native, entry)) == python_frames(site_of(default, entry))
        assert len(frames) > len(site_of(default, entry)["frames"])
        runs = runs_after_loops(frames)
        # Every loop ran Python frames, and they are the stack's, in order.
        assert all(runs), (scenario, runs)
        assert [function for run in runs for function in run] == entry["qualnames"], scenario
        wanted = [1] * len(entry["qualnames"]) if sys.version_info < (3, 11) else RUNS_FROM_3_11[scenario]
        if wanted is not None:
            assert [len(run) for run in runs] == wanted, (scenario, runs)
        # Frames that are outside the interpreter, at the bottom of the process.
        assert any(frame["function"] in ("main", "__libc_start_main", "_start") or frame["function"].startswith(
            "__libc_start") for frame in frames), scenario

    # The C code that called back sits between the callback's frames and its caller's.
    sorted_frames = site_of(native, expected["callback"])["frames"]
    called_back = between(sorted_frames, "key", "sort_with_key")
    assert any(frame["function"] in ("builtin_sorted", "list_sort_impl") for frame in called_back), called_back
    ctypes_frames = site_of(native, expected["ctypes_callback"])["frames"]
    called_back = [frame["module"] for frame in between(ctypes_frames, "compare", "sort_in_c")]
    assert any(os.path.basename(module).startswith("libffi.so") for module in called_back), called_back
    assert any(os.path.basename(module) == "libc.so.6" for module in called_back), called_back


def test_the_text_report_names_the_leaking_line(recorded):
    trace, expected = recorded
    text = run_report(trace, "--top", "100", "--no-color")

    def name(frame_index, entry):
        filename, line, _ = entry["frames"][frame_index]
        return "%s:%d in %s" % (filename, line, entry["qualnames"][frame_index])

    # A line's continuation (a long path wraps) joined to it.
    joined = text.replace("\n          ", " ")
    for scenario, entry in expected.items():
        # The site is headed by the leaking line (in leak()), with its text; its caller comes first among
        # the program's frames that called it.
        pattern = r"  #\d+ %s  [^\n]+\n        [^\n]+\n(?:        → [^\n]+\n)?        from %s( ←|\n)" % (
            re.escape(name(0, entry)),
            re.escape(name(1, entry)),
        )
        assert re.search(pattern, joined), scenario
    # Where C code called back, the program's frames on either side of it follow one another.
    entry = expected["ctypes_callback"]
    assert "from %s ← %s" % (name(1, entry), name(2, entry)) in joined
    diagnosis = text.split("Diagnosis: ", 1)[1].split("\n\n", 1)[0]
    assert diagnosis.startswith("leak")
    assert name(0, expected["loop"]) in " ".join(diagnosis.split())
    growing = text.split("Growing: held by the program and made through its work (largest first):\n", 1)[1]
    assert "  #1 %s  " % name(0, expected["loop"]) in growing.split("\n\n", 1)[0]



def pprof_samples(profile):
    """`go tool pprof -raw`'s samples: (inuse_space, [(function, file, line), ...] innermost first)."""
    completed = subprocess.run(
        [build_file("GPULEAK_TEST_GO"), "tool", "pprof", "-raw", str(profile)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        encoding="utf-8",
        timeout=120,
    )
    assert completed.returncode == 0, completed.stderr
    samples_part, locations_part = completed.stdout.split("\nSamples:\n", 1)[1].split("\nLocations\n", 1)
    locations = {}
    for line in locations_part.split("\nMappings\n", 1)[0].splitlines():
        # "     7: 0x0 keep_history /path/file.py:23 s=0"; a name in angle brackets comes last, in
        # parentheses: "     8: 0x0  /path/file.py:22 s=0(<module>)".
        match = re.match(r"\s*(\d+): \S+ (\S*) (.*):(\d+) s=\d+(?:\((.*)\))?$", line)
        if match:
            locations[int(match[1])] = (match[2] or match[5], match[3], int(match[4]))
    samples = []
    for line in samples_part.splitlines()[1:]:
        match = re.match(r"\s*(-?\d+) +(-?\d+) +(-?\d+) +(-?\d+): ([\d ]*)$", line)
        if match:
            samples.append((int(match[4]), [locations[int(id)] for id in match[5].split()]))
    return samples


def test_pprof_shows_each_leak_with_its_python_frames_as_its_outermost(recorded, tmp_path):
    trace, expected = recorded
    profile = tmp_path / "profile.pb.gz"
    run_report(trace, "--format", "pprof", "-o", str(profile))
    samples = pprof_samples(profile)
    for scenario, entry in expected.items():
        (frames,) = [frames for inuse, frames in samples if inuse == entry["bytes"]]
        wanted = [
            (qualname, filename, line)
            for (filename, line, _), qualname in zip(entry["frames"], entry["qualnames"])
        ]
        # The native frames that made the call come first, then the Python stack as taken, to its root.
        assert frames[-len(wanted) :] == wanted, (scenario, frames, wanted)
        assert len(frames) > len(wanted), scenario



def test_two_runs_of_a_script_are_compared_by_its_lines(recorded, tmp_path):
    trace, expected = recorded
    script = trace.parent / "scenarios.py"
    # The same script and the module it writes beside its output, from the same place, two rounds longer:
    # only the loop's line holds more.
    longer = run_scenarios(script, trace.parent / "expected_longer.json", LOOP_ROUNDS + 2, tmp_path)
    document = json.loads(run_report_args("--format", "json", "--diff", str(trace), str(longer)))
    assert document["change_bytes"] == 2 * 16 * MiB
    (change,) = document["changes"]
    assert (change["before"]["count"], change["after"]["count"]) == (LOOP_ROUNDS, LOOP_ROUNDS + 2)
    frames = [(frame["file"], frame["line"]) for frame in change["frames"] if frame["python"]]
    assert frames == [(filename, line) for filename, line, _ in expected["loop"]["frames"]]


# Strings the program controls: its command line, a file it compiles code under, a function's name, a
# marker and a named source (a notebook cell's name and text), each with terminal escapes (a window
# title, a link, clear-screen, colours) and a newline that would forge a line of the report.
HOSTILE = "\x1b]0;pwned\x07\x1b]8;;http://evil\x1b\\link\x1b]8;;\x1b\\\x1b[2J\x1b[31mred\u202e\nFAKE LINE: diagnosis: stable"
HOSTILE_SCRIPT = textwrap.dedent(
    """\
    import ctypes, os, sys

    hostile = sys.argv[1]
    cudart = ctypes.CDLL(os.path.join(os.environ["SIMDEVICE_DIR"], "libcudart.so.13"))
    cudart.cudaMalloc.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_size_t]
    gpuleak = ctypes.CDLL(None)
    gpuleak.gpuleak_mark(("epoch " + hostile).encode())
    kept = []
    source = "def allocate(size):\\n    pointer = ctypes.c_void_p()\\n    cudart.cudaMalloc(ctypes.byref(pointer), size)\\n    kept.append(pointer)\\n"
    file_name = "model" + hostile + ".py"
    gpuleak.gpuleak_name_source(file_name.encode(), ("cell " + hostile).encode(), source.encode())
    namespace = {"ctypes": ctypes, "cudart": cudart, "kept": kept}
    exec(compile(source, file_name, "exec"), namespace)
    allocate = namespace["allocate"]
    names = {"co_name": "allocate" + hostile}
    if sys.version_info >= (3, 11):
        names["co_qualname"] = "allocate" + hostile
    allocate.__code__ = allocate.__code__.replace(**names)
    for _ in range(10):
        allocate(1 << 20)
        gpuleak.gpuleak_mark(("step " + hostile).encode())
    """
)


def test_strings_the_program_controls_are_shown_escaped_and_never_make_a_line(tmp_path):
    script = tmp_path / "hostile.py"
    script.write_text(HOSTILE_SCRIPT, encoding="utf-8")
    completed = subprocess.run(
        [sys.executable, str(script), HOSTILE],
        env=recording_environment(tmp_path),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert completed.returncode == 0, completed.stderr
    (trace,) = tmp_path.glob("trace.*")
    text = run_report(trace, "--no-color", "--top", "100")
    escaped = "\\x1b]0;pwned\\x07\\x1b]8;;http://evil\\x1b\\link\\x1b]8;;\\x1b\\\\x1b[2J\\x1b[31mred\\u202e\\nFAKE LINE: diagnosis: stable"
    # Nothing for a terminal to act on, and no line the program made.
    assert "\x1b" not in text and "\x07" not in text and "\u202e" not in text
    assert not any(line.startswith("FAKE LINE") for line in text.splitlines())
    # Each string is there, escaped: the command line, the site's file, function and cell, the markers.
    # Lines wrapped at 100 columns break long labels at their spaces.
    words = " ".join(text.split())
    assert words.count(escaped) >= 4, text
    assert "hostile.py " + escaped in words
    assert "allocate" + escaped in words
    assert "cell " + escaped in words
    assert "step " + escaped in words
    # JSON keeps them as they were.
    process = process_of(run_report(trace, "--format", "json"))
    assert process["command"][-1] == HOSTILE
    assert {marker["label"] for marker in process["markers"]} == {"epoch " + HOSTILE, "step " + HOSTILE}
    functions = {frame["function"] for site in process["leaks"] for frame in site["frames"]}
    assert "allocate" + HOSTILE in functions
