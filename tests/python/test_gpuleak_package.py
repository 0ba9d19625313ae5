"""The gpuleak Python package (python/gpuleak), on the interpreter running pytest.

Without libgpuleak.so (this pytest process): every function is a no-op and isolated() still runs the
call in a child. With it (a child interpreter started with LD_PRELOAD=libgpuleak.so on the simulated
device): markers reach the trace, and isolated() hands back the child's own trace and its report.
ctest runs this file once per CPython 3.10+ under pyenv (tests/python/CMakeLists.txt), with
GPULEAK_TEST_LIBRARY, GPULEAK_TEST_SIMDEVICE_DIR, GPULEAK_TEST_REPORT and GPULEAK_TEST_DUMP naming the
build's files; the tests that need them skip when they are not set.
"""

import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
PACKAGE_DIR = HERE.parent.parent / "python"
sys.path.insert(0, str(PACKAGE_DIR))

import gpuleak  # noqa: E402
import gpuleak_package_targets as targets  # noqa: E402
from gpuleak import _formatting, _native, _report  # noqa: E402
from gpuleak._why import _graphs  # noqa: E402

BUILD_FILES = ("GPULEAK_TEST_LIBRARY", "GPULEAK_TEST_SIMDEVICE_DIR", "GPULEAK_TEST_REPORT", "GPULEAK_TEST_DUMP")


def build_file(name):
    value = os.environ.get(name)
    if not value:
        pytest.skip("%s is not set (ctest sets it)" % name)
    return value


# ---- Without the library ------------------------------------------------------------------------


@pytest.fixture(autouse=True)
def library_not_loaded(request):
    if "preloaded" not in request.node.name and _native.loaded():
        pytest.skip("libgpuleak.so is loaded into the pytest process itself")


def test_functions_are_no_ops_without_the_library(capfd):
    assert gpuleak.active() is False
    assert gpuleak.trace_path() is None
    assert gpuleak.mark("epoch 3") is None
    assert gpuleak.mark(object()) is None
    with gpuleak.phase("epoch 3") as entered:
        assert entered.label == "epoch 3"

    @gpuleak.phase("decorated")
    def decorated(value):
        return value + 1

    assert decorated(1) == 2
    with pytest.raises(KeyError):
        with gpuleak.phase("failing"):
            raise KeyError("propagates")
    answer = gpuleak.why()
    assert answer.holders == [] and answer.sites == []
    assert str(answer) == "gpuleak: why: not recording: libgpuleak.so is not loaded in this process"
    out, err = capfd.readouterr()
    assert out == "" and err == ""


def test_isolated_returns_without_the_library(capfd):
    assert gpuleak.isolated(targets.double, 20, plus=2) == 42
    run = gpuleak.last_isolated()
    assert run.returned and run.exitcode == 0
    assert run.pid is not None and run.pid != os.getpid()
    assert run.trace_path is None and run.report is None and run.process is None
    assert "not recorded" in run.summary
    assert "libgpuleak.so is not loaded" in run.report_error
    assert capfd.readouterr().out == ""


def test_isolated_runs_in_a_fresh_process():
    child = gpuleak.isolated(targets.describe_process)
    assert child["pid"] != os.getpid()
    assert child["pid"] == gpuleak.last_isolated().pid


def test_isolated_reraises_the_exception_with_the_child_traceback():
    with pytest.raises(ValueError, match="^boom in the child$") as raised:
        gpuleak.isolated(targets.fail, "boom in the child")
    cause = raised.value.__cause__
    assert isinstance(cause, gpuleak.ChildTraceback)
    assert "in fail" in cause.text and "ValueError: boom in the child" in cause.text
    assert "_child_main" not in cause.text  # the traceback starts in fn
    run = gpuleak.last_isolated()
    assert not run.returned and run.exitcode == 0 and ("pid %d" % run.pid) in cause.text


def test_an_exception_pickle_cannot_rebuild_comes_back_as_isolated_error():
    with pytest.raises(gpuleak.IsolatedError, match="TwoArgumentError: code 7") as raised:
        gpuleak.isolated(targets.fail_unpicklably)
    assert raised.value.run is gpuleak.last_isolated()
    assert "TwoArgumentError" in raised.value.__cause__.text


def test_an_unpicklable_function_is_refused_before_starting():
    with pytest.raises(TypeError, match="importable by name"):
        gpuleak.isolated(lambda: 1)

    def local():
        return 1

    with pytest.raises(TypeError, match="importable by name"):
        gpuleak.isolated(local)
    with pytest.raises(TypeError, match="picklable"):
        gpuleak.isolated(targets.double, lambda: 2)


def test_an_unpicklable_result_is_an_isolated_error():
    with pytest.raises(gpuleak.IsolatedError, match="cannot be pickled back"):
        gpuleak.isolated(targets.return_unpicklable)


def test_a_child_killed_by_a_signal_is_an_isolated_error():
    with pytest.raises(gpuleak.IsolatedError, match="killed by SIGKILL") as raised:
        gpuleak.isolated(targets.kill_self)
    assert raised.value.run.exitcode == -signal.SIGKILL
    assert not raised.value.run.returned


def test_a_child_that_exits_without_returning_is_an_isolated_error():
    with pytest.raises(gpuleak.IsolatedError, match="exited with status 3"):
        gpuleak.isolated(targets.exit_hard, 3)
    assert gpuleak.last_isolated().exitcode == 3


def test_labels_are_cut_at_a_character_boundary():
    assert _native.encode_label("epoch 3") == b"epoch 3"
    assert _native.encode_label(3) == b"3"
    assert _native.encode_label(b"raw") == b"raw"
    cut = _native.encode_label("é" * 600)
    assert len(cut) == 1022 and cut.decode("utf-8") == "é" * 511


def test_summary_line_from_a_report_entry():
    process = {
        "summary": {"peak_reserved_bytes": 3 << 30, "peak_allocated_bytes": 1536 << 20, "final_reserved_bytes": 0},
        "diagnosis": {"kind": "stable", "text": "No sign of a leak."},
    }
    assert _report.summary_line(process) == (
        "peak reserved 3.0 GiB, peak allocated 1.5 GiB, 0 B still reserved at the end; stable: No sign of a leak."
    )


def test_the_notebook_view_says_what_is_not_exact_beside_the_figures():
    from gpuleak import _magic

    process = {
        "pid": 7,
        "summary": {
            "final_reserved_bytes": 1 << 20,
            "peak_reserved_bytes": 1 << 20,
            "final_allocated_bytes": 1 << 20,
            "peak_allocated_bytes": 1 << 20,
            "exactness": {"notes": ["10 of the allocations live at the end (5.0 KiB) found no slot of their own."]},
        },
        "leaks": [],
    }
    lines = _magic.live_state(process, "/tmp/t.trace").splitlines()
    assert lines[2] == "  not exact: 10 of the allocations live at the end (5.0 KiB) found no slot of their own."
    del process["summary"]["exactness"]
    assert not any("not exact" in line for line in _magic.live_state(process, "/tmp/t.trace").splitlines())


def test_the_notebook_view_shows_the_programs_strings_escaped_on_their_own_lines():
    from gpuleak import _magic

    hostile = "\x1b]0;pwned\x07\x1b[2J\u202e\nFAKE LINE: nothing held"
    process = {
        "pid": 7,
        "summary": {"final_reserved_bytes": 1 << 20, "final_allocated_bytes": 1 << 20},
        "markers": [{"t_s": 0.0, "label": "cell [1]" + hostile}, {"t_s": 1.0, "label": "cell [2]"}],
        "timeline": [],
        "leaks": [
            {
                "bytes": 1 << 20,
                "count": 1,
                "frames": [
                    {"python": True, "program": True, "file": "model" + hostile + ".py", "line": 3,
                     "function": "forward" + hostile},
                    {"python": True, "source_name": "cell [1]" + hostile, "line": 2,
                     "source_line": "model(x)" + hostile},
                ],
            }
        ],
    }
    text = _magic.live_state(process, "/tmp/t.trace")
    assert "\x1b" not in text and "\x07" not in text and "\u202e" not in text
    assert not any(line.startswith("FAKE LINE") for line in text.splitlines())
    escaped = "\\x1b]0;pwned\\x07\\x1b[2J\\u202e\\nFAKE LINE: nothing held"
    assert "model%s.py:3 in forward%s, from cell [1]%s, line 2 (`model(x)%s`)" % ((escaped,) * 4) in text
    assert "since cell [1]%s began" % escaped in text
    assert _formatting.printable("été \udcff\t") == "été \\xff\\t"


def wheel_capable_setuptools():
    """"sdist": setuptools only; "wheel": setuptools that can build wheels offline; None: neither."""
    try:
        import setuptools
    except ImportError:
        return None
    try:
        if tuple(int(part) for part in setuptools.__version__.split(".")[:2]) >= (70, 1):
            return "wheel"
        import wheel  # noqa: F401

        return "wheel"
    except (ImportError, ValueError):
        return "sdist"


def test_the_package_builds_and_installs_without_a_compiler(tmp_path):
    # Offline and without build isolation (a plain `pip install ./python` fetches setuptools and wheel
    # from PyPI when the interpreter lacks them), on a copy: no build files land in the source tree.
    capability = wheel_capable_setuptools()
    if capability is None:
        pytest.skip("setuptools is not installed for this interpreter")
    source = tmp_path / "source"
    shutil.copytree(PACKAGE_DIR, source, ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__"))
    environment = dict(os.environ, PIP_DISABLE_PIP_VERSION_CHECK="1", CC="/bin/false", CXX="/bin/false")
    # Every file of the package, its subpackages' too.
    files = [str(path.relative_to(PACKAGE_DIR)) for path in (PACKAGE_DIR / "gpuleak").rglob("*")
             if path.is_file() and "__pycache__" not in path.parts]
    assert "gpuleak/_why/__init__.py" in files
    if capability == "sdist":
        built = subprocess.run(
            [sys.executable, "-c", "import sys; from setuptools import build_meta; "
             "print(build_meta.build_sdist(sys.argv[1]))", str(tmp_path)],
            check=True, env=environment, cwd=source, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
            universal_newlines=True,
        ).stdout.split()[-1]
        import tarfile

        with tarfile.open(tmp_path / built) as archive:
            names = archive.getnames()
        assert built == "gpuleak-0.1.0.tar.gz"
        assert all("gpuleak-0.1.0/" + name in names for name in files)
        return
    target = tmp_path / "site"
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-build-isolation", "--no-deps", "--no-index",
         "--target", str(target), str(source)],
        check=True, env=environment, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
    )
    found = subprocess.run(
        [sys.executable, "-c", "import gpuleak; print(gpuleak.__file__, gpuleak.active())"],
        check=True, env=dict(os.environ, PYTHONPATH=str(target)), cwd=tmp_path, stdout=subprocess.PIPE,
        universal_newlines=True,
    ).stdout.split()
    assert found == [str(target / "gpuleak" / "__init__.py"), "False"]
    assert all((target / name).is_file() for name in files)


# ---- With the library preloaded -----------------------------------------------------------------

SCENARIO = textwrap.dedent(
    """\
    import json, os, sys
    import gpuleak
    import gpuleak_package_targets as targets
    from gpuleak import _report

    LEAK = 3 << 20

    if __name__ == "__main__":
        out = {"pid": os.getpid(), "active": gpuleak.active(), "trace_path": gpuleak.trace_path()}
        gpuleak.mark("first marker")
        with gpuleak.phase("epoch 3"):
            pass
        try:
            with gpuleak.phase("failing phase"):
                raise KeyError("k")
        except KeyError:
            pass

        @gpuleak.phase("decorated")
        def decorated():
            pass

        decorated()
        gpuleak.mark("\\u00e9" * 600)

        address = gpuleak.isolated(targets.leak, LEAK)
        run = gpuleak.last_isolated()
        out["isolated"] = {
            "address": address, "pid": run.pid, "exitcode": run.exitcode, "returned": run.returned,
            "trace_path": run.trace_path, "process": run.process, "summary": run.summary,
            "report_error": run.report_error, "str": str(run),
        }

        try:
            gpuleak.isolated(targets.fail, "boom in the child")
        except ValueError as error:
            out["raised"] = {"type": type(error).__name__, "message": str(error),
                             "cause": error.__cause__.text, "trace_path": gpuleak.last_isolated().trace_path}

        # A recorded process whose environment lost LD_PRELOAD still gets a recorded child.
        preload = os.environ.pop("LD_PRELOAD")
        child = gpuleak.isolated(targets.describe_process)
        out["without_preload"] = {"child": child, "trace_path": gpuleak.last_isolated().trace_path,
                                  "restored": "LD_PRELOAD" in os.environ}
        os.environ["LD_PRELOAD"] = preload

        # gpuleak-report beside the library (the build tree's ../analyzer), when not named nor on PATH.
        del os.environ["GPULEAK_REPORT"]
        os.environ["PATH"] = "/nonexistent"
        out["report_beside_library"] = _report.find_report()[0]
        with open(sys.argv[1], "w") as output:
            json.dump(out, output)
    """
)


# What keeps device memory alive: another library's arrays, in a list, in a dict, in a closure, and memory
# only an int holds.
WHY_SCENARIO = textwrap.dedent(
    """\
    import gc, json, sys
    import gpuleak
    import gpuleak_package_targets as targets

    kept = [targets.DeviceArray(1 << 20) for _ in range(3)]
    cache = {"step 1": targets.DeviceArray(2 << 20)}

    def remember(array):
        return lambda: array.size

    callback = remember(targets.DeviceArray(4 << 20))
    loose = targets.leak(5 << 20)
    compiled = targets.CompiledDeviceArray(6 << 20)
    # The program's own containers, which must not be called into: the search reads them as their base types.
    hostile = targets.Hostile([targets.DeviceArray(7 << 20)])
    keyed = {targets.HostileKey(): targets.DeviceArray(8 << 20)}

    class Registry:
        cached = targets.DeviceArray(10 << 20)

    class Slotted:
        __slots__ = ("array",)

    slotted = Slotted()
    slotted.array = targets.DeviceArray(11 << 20)

    def answer_from_a_function():
        in_a_function = [targets.DeviceArray(9 << 20)]
        return gpuleak.why()

    def as_data(answer):
        return {"text": answer.text, "problem": answer.problem, "stopped": answer.stopped,
                "objects_searched": answer.objects_searched,
                "holders": [[h.root, h.bytes, h.tensors, h.path, h.through] for h in answer.holders],
                "unreached": [[answer.sites[site].where, size] for site, size in answer.unreached]}

    answers = {"full": as_data(answer_from_a_function()), "trace": gpuleak.trace_path()}
    answers["gc_enabled"] = gc.isenabled()
    answers["no_time"] = as_data(gpuleak.why(time_limit_s=0))
    with open(sys.argv[1], "w") as output:
        json.dump(answers, output)
    """
)


def preloaded_environment(directory):
    environment = {name: value for name, value in os.environ.items() if not name.startswith("GPULEAK_")}
    environment.update(
        LD_PRELOAD=build_file("GPULEAK_TEST_LIBRARY"),
        LD_LIBRARY_PATH=build_file("GPULEAK_TEST_SIMDEVICE_DIR"),
        GPULEAK_OUTPUT=str(directory / "trace.%p"),
        GPULEAK_SIM_QUIET="1",
        GPULEAK_QUIET="1",
        GPULEAK_REPORT=build_file("GPULEAK_TEST_REPORT"),
        GPULEAK_TEST_SIMDEVICE_DIR=build_file("GPULEAK_TEST_SIMDEVICE_DIR"),
        PYTHONPATH=os.pathsep.join([str(PACKAGE_DIR), str(HERE)]),
    )
    return environment


def report(trace):
    completed = subprocess.run(
        [build_file("GPULEAK_TEST_REPORT"), "--format", "json", str(trace)],
        check=True, stdout=subprocess.PIPE, universal_newlines=True,
    )
    return json.loads(completed.stdout)


def process_of(document, pid):
    (entry,) = [process for process in document["processes"] if process["pid"] == pid]
    return entry


@pytest.fixture(scope="module")
def preloaded(tmp_path_factory):
    for name in BUILD_FILES:
        build_file(name)
    directory = tmp_path_factory.mktemp("preloaded")
    script = directory / "scenario.py"
    script.write_text(SCENARIO)
    result = directory / "result.json"
    completed = subprocess.run(
        [sys.executable, str(script), str(result)],
        env=preloaded_environment(directory), cwd=directory, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        universal_newlines=True, timeout=120,
    )
    assert completed.returncode == 0, completed.stderr
    assert completed.stdout == ""  # the package never prints to stdout
    return json.loads(result.read_text()), directory


def test_preloaded_why_names_the_programs_holders_of_device_memory(tmp_path):
    script = tmp_path / "why_scenario.py"
    script.write_text(WHY_SCENARIO)
    completed = subprocess.run(
        [sys.executable, str(script), str(tmp_path / "why.json")],
        env=preloaded_environment(tmp_path), cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        universal_newlines=True, timeout=120,
    )
    assert completed.returncode == 0, completed.stderr
    assert completed.stdout == ""
    answers = json.loads((tmp_path / "why.json").read_text())
    why = answers["full"]
    assert why["problem"] is None and not why["stopped"], why["text"]
    holders = {root: (size, count, path, through) for root, size, count, path, through in why["holders"]}
    assert holders["`callback`, a function in __main__"] == (
        4 << 20, 1, "callback.__closure__[0].cell_contents", ["closure"]
    )
    assert holders["`cache`, a dict with 1 item in __main__"] == (2 << 20, 1, "cache['step 1']", [])
    size, count, path, _ = holders["`kept`, a list with 3 items in __main__"]
    assert (size, count) == (3 << 20, 3) and path.startswith("kept[")
    # A compiled class's array, found by its descriptor.
    assert holders["`compiled`, a CompiledDeviceArray in __main__"][:3] == (6 << 20, 1, "compiled")
    # Containers whose methods raise: read as their base types, keys spelled by their type.
    assert holders["`hostile`, a Hostile with 1 item in __main__"][:3] == (7 << 20, 1, "hostile[0]")
    assert holders["`keyed`, a dict with 1 item in __main__"][:3] == (8 << 20, 1, "keyed[<HostileKey>]")
    # A local of the function that asked, named with the line it was at.
    (local,) = [root for root in holders if root.startswith("`in_a_function`, a list with 1 item, a local of ")]
    assert local.startswith("`in_a_function`, a list with 1 item, a local of answer_from_a_function() at why_scenario.py:")
    assert holders[local][:3] == (9 << 20, 1, "in_a_function[0]")
    # A class attribute and a slot, spelled as Python spells them.
    assert holders["`Registry`, a class in __main__"][:3] == (10 << 20, 1, "Registry.cached")
    assert holders["`slotted`, a Slotted in __main__"][:3] == (11 << 20, 1, "slotted.array")
    assert len(holders) == 9, why["text"]
    # Held by an int alone: nothing to tell it from any other int.
    ((where, unreached),) = why["unreached"]
    assert unreached == 5 << 20 and "leak" in where, why["text"]
    lines = why["text"].splitlines()
    assert lines[0].startswith("gpuleak: what keeps this process's GPU memory alive (pid ")
    # The largest first, at the line that allocated it (the program's own module's).
    assert lines[1].startswith("  11.0 MiB in 1 array made at ") and "gpuleak_package_targets.py:" in lines[1]
    closure = lines.index("    through callback.__closure__[0].cell_contents")
    assert lines[closure + 1] == "    a function defined in a loop or a callback keeps what it closes over"
    assert answers["gc_enabled"] is True
    # No time at all: stopped at once, and said so for what it had not reached.
    stopped = answers["no_time"]
    assert stopped["stopped"] is True and stopped["problem"] is None
    assert stopped["objects_searched"] < 1024
    assert "the search stopped after" in stopped["text"], stopped["text"]
    # Each answer is recorded in the trace, where the report shows it beside the sites it names.
    (process,) = report(answers["trace"])["processes"]
    # And, by default, what held the memory as the program ended.
    full, no_time, at_exit = process["retainers"]
    assert [full["moment"], full["label"], no_time["moment"]] == ["on_demand", "gpuleak.why()", "on_demand"]
    assert [at_exit["moment"], at_exit["label"]] == ["exit", "the program's exit"]
    assert sorted(holder["root"] for holder in full["holders"]) == sorted(holders)
    assert no_time["stopped"] is True
    (kept,) = [holder for holder in full["holders"] if holder["root"].startswith("`kept`")]
    assert kept["through"] == [] and kept["advice"] == [] and kept["bytes"] == 3 << 20
    (site,) = kept["sites"]
    assert site["path"].startswith("kept[") and site["bytes"] == 3 << 20
    leak = process["leaks"][site["leak"]]
    # Per the latest record that names it: the one at exit.
    (held,) = leak["held_by"]
    assert (held["root"], held["bytes"]) == (kept["root"], 3 << 20) and held["path"].startswith("kept[")


def graph_passes(children, saved, roots):
    """What gpuleak.why() tells of a holder's graphs (Graphs.passes), for a graph of len(saved) nodes:
    children[n] are node n's next functions (the parameters' leaves left out), saved[n] what it saved, roots
    the nodes of the tensors it keeps."""
    graphs = _graphs.Graphs()
    for _ in saved:
        graphs.add(object())
    graphs.children = [list(children.get(node, ())) for node in range(len(saved))]
    graphs.saved = [{"-": _graphs.NOTHING, "s": _graphs.SAVED, "f": _graphs.FREED}[state] for state in saved]
    graphs.tensors = [(root, "tensor at node %d" % root, step) for step, root in enumerate(roots)]
    return graphs.passes()


def passes_of(children, saved, roots):
    """The forward passes still holding what they saved, and the passes backward() ran through."""
    passes, spent, _, _, _, _ = graph_passes(children, saved, roots)
    return passes, spent


def test_a_running_total_joins_its_steps_in_one_tensor_a_list_of_losses_one_each():
    # total += loss over four steps, each backward()'s: the one tensor joins all four spent passes.
    chain = {0: [1, 2], 1: [3, 4], 3: [5, 6], 2: [7], 4: [8], 5: [9], 6: [10]}
    assert graph_passes(chain, "-------ffff", [0])[4:] == (4, 4)
    # losses.append(loss) over three steps: three spent passes, each tensor its own.
    _, spent, _, _, joined, spent_by_one = graph_passes({0: [3], 1: [4], 2: [5]}, "ffffff", [0, 1, 2])
    assert (spent, joined, spent_by_one) == (3, 1, 1)


def test_a_graph_is_told_by_the_forward_passes_it_joins():
    # Three residual blocks of one pass (x = x + f(x)): each sum saves nothing, yet one pass.
    assert passes_of({0: [1, 2], 1: [3, 4], 2: [1], 3: [5, 6], 4: [3], 5: [7], 6: [5], 7: []},
                     "--s-s-ss", [0]) == (1, 0)
    # A recurrent net's loss over four time steps: each step reaches the one before.
    assert passes_of({0: [1, 2], 1: [3, 4], 2: [5], 3: [5], 4: [6], 5: [6], 6: []}, "--sssss", [0]) == (1, 0)
    # A running total (total += loss) of four steps, each backward()'s: the chain of sums joins them.
    chain = {0: [1, 2], 1: [3, 4], 3: [5, 6], 2: [7], 4: [8], 5: [9], 6: [10]}
    assert passes_of(chain, "-------ffff", [0]) == (0, 4)
    # Validation outputs concatenated, or kept in a list: one pass a batch.
    assert passes_of({0: [1, 2, 3], 1: [4], 2: [5], 3: [6]}, "-ssssss", [0]) == (3, 0)
    assert passes_of({0: [3], 1: [4], 2: [5]}, "ssssss", [0, 1, 2]) == (3, 0)
    # Two outputs of one forward pass, kept together (a tuple): one pass.
    assert passes_of({0: [2], 1: [2], 2: []}, "sss", [0, 1]) == (1, 0)
    # A view of one output kept beside it: nothing saved above the pass.
    assert passes_of({0: [1], 1: [2], 2: []}, "-ss", [0, 1]) == (1, 0)


def test_a_holders_graphs_are_named_by_its_tensor_that_joins_the_most_passes():
    # The last batch's output (node 4), then the concatenation of three batches' (node 0).
    graphs = _graphs.Graphs()
    children = {0: [1, 2, 3], 4: [5]}
    for node in range(6):
        graphs.add(object())
    graphs.children = [children.get(node, []) for node in range(6)]
    graphs.saved = [_graphs.NOTHING] + [_graphs.SAVED] * 5
    graphs.tensors = [(4, "outputs[-1]", 7), (0, "predictions", 9)]
    assert graphs.passes() == (4, 0, "predictions", 9, 3, 0)


MOMENTS_SCENARIO = textwrap.dedent(
    """\
    import ctypes, json, sys
    import gpuleak_package_targets as targets

    kept = [targets.DeviceArray(1 << 20) for _ in range(3)]
    library = ctypes.PyDLL(None)
    # What the PyTorch adapter does before an out-of-memory error reaches the program: twice, as a program
    # that catches its errors meets them.
    library.gpuleak_out_of_memory(0)
    library.gpuleak_out_of_memory(0)
    if "gpuleak" in sys.modules:
        import gpuleak

        for epoch in range(2):
            with gpuleak.phase("epoch %d" % epoch):
                kept.append(targets.DeviceArray(1 << 20))
    path = ctypes.create_string_buffer(4096)
    library.gpuleak_trace_path(path, 4096)
    with open(sys.argv[1], "w") as output:
        json.dump({"trace": path.value.decode(), "imported": "gpuleak" in sys.modules}, output)
    """
)


@pytest.mark.parametrize(
    "why, package, moments, said",
    [
        # The package is not on the program's path: the library imports it from where `gpuleak run` says.
        (None, True, ["out_of_memory", "out_of_memory", "exit"], ""),
        ("oom,phase", True, ["out_of_memory", "out_of_memory", "phase_end", "phase_end"], ""),
        ("exit", True, ["exit"], ""),
        ("None", True, [], ""),
        ("sometimes", True, ["out_of_memory", "out_of_memory", "exit"], "gpuleak: GPULEAK_WHY=sometimes: expected"),
        # Nowhere to import it from: said once, and the program goes on.
        (None, False, [], "gpuleak: the program cannot import the gpuleak Python package"),
    ],
)
def test_preloaded_out_of_memory_errors_phase_ends_and_the_exit_record_what_held_the_memory(tmp_path, why, package, moments, said):
    script = tmp_path / "moments_scenario.py"
    script.write_text(MOMENTS_SCENARIO)
    environment = preloaded_environment(tmp_path)
    environment["PYTHONPATH"] = str(HERE)
    if package:
        environment["GPULEAK_PYTHON_PACKAGE"] = str(PACKAGE_DIR)
    if why is not None:
        environment["GPULEAK_WHY"] = why
    completed = subprocess.run(
        [sys.executable, str(script), str(tmp_path / "out.json")],
        env=environment, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        universal_newlines=True, timeout=120,
    )
    assert completed.returncode == 0, completed.stderr
    assert completed.stdout == ""
    said_lines = completed.stderr.splitlines()
    if said:
        (line,) = said_lines
        assert line.startswith(said), completed.stderr
    else:
        assert said_lines == [], completed.stderr
    out = json.loads((tmp_path / "out.json").read_text())
    # Left alone where GPULEAK_WHY leaves out-of-memory errors out: not even imported, until the exit.
    assert out["imported"] is (package and moments[:1] == ["out_of_memory"])
    (process,) = report(out["trace"])["processes"]
    records = process["retainers"]
    assert [record["moment"] for record in records] == moments
    for record in records:
        assert record["problem"] is None
        kept = record["holders"][0]
        assert kept["root"] == "`kept`, a list with %d items in __main__" % (kept["bytes"] >> 20)
    if moments[:1] == ["out_of_memory"]:
        assert [records[0]["label"], records[0]["device"]] == ["out of memory on device 0", 0]
        assert records[0]["holders"][0]["bytes"] == 3 << 20
    if "phase_end" in moments:
        assert [record["label"] for record in records[2:]] == ["end of epoch 0", "end of epoch 1"]
        assert records[-1]["holders"][0]["bytes"] == 5 << 20
    if "exit" in moments:
        # Registered as the program came to hold device memory, run as it ended: what it held then.
        assert records[-1]["label"] == "the program's exit"
        assert records[-1]["holders"][0]["bytes"] == (5 if out["imported"] else 3) << 20


FORKED_AT_EXIT_SCENARIO = textwrap.dedent(
    """\
    import os, sys
    import gpuleak_package_targets as targets

    kept = targets.DeviceArray(1 << 20)
    child = os.fork()
    if child == 0:
        # Ends as a program does, running the atexit handlers it inherited.
        sys.exit(0)
    _, status = os.waitpid(child, 0)
    print(status, child)
    """
)


@pytest.mark.parametrize("all_processes", ["1", "0"])
def test_a_forked_child_ends_as_it_would_and_only_the_parent_records_at_exit(tmp_path, all_processes):
    script = tmp_path / "forked_at_exit.py"
    script.write_text(FORKED_AT_EXIT_SCENARIO)
    environment = preloaded_environment(tmp_path)
    # "0": the child has no trace of its own at all.
    environment["GPULEAK_ALL_PROCESSES"] = all_processes
    # 3.12's warning that a process with gpuleak's sampler thread forks (docs/guides/workers-and-host-memory.md).
    environment["PYTHONWARNINGS"] = "ignore::DeprecationWarning"
    completed = subprocess.run(
        [sys.executable, str(script)], env=environment, cwd=tmp_path, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, universal_newlines=True, timeout=120,
    )
    assert completed.returncode == 0 and completed.stderr == "", completed.stderr
    status, child = completed.stdout.split()
    assert status == "0", "the child ended as it would without gpuleak"
    document = report(tmp_path / ("trace.%d" % completed_pid(tmp_path, int(child))))
    parent = [process for process in document["processes"] if process["pid"] != int(child)]
    assert [record["moment"] for record in parent[0]["retainers"]] == ["exit"]
    children = [process for process in document["processes"] if process["pid"] == int(child)]
    # Found beside its parent's where it has a trace of its own, and with no record of the parent's search.
    assert len(children) == (1 if all_processes == "1" else 0)
    assert all(process["retainers"] == [] for process in children)


def completed_pid(directory, child):
    """The pid of the traced program whose trace lies in `directory`, besides its child's."""
    (parent,) = [int(path.name.split(".")[1]) for path in directory.glob("trace.*") if path.name != "trace.%d" % child]
    return parent


def test_preloaded_active_and_trace_path(preloaded):
    out, directory = preloaded
    assert out["active"] is True
    assert out["trace_path"] == str(directory / ("trace.%d" % out["pid"]))
    assert os.path.isfile(out["trace_path"])


def test_preloaded_markers_reach_the_trace(preloaded):
    out, _ = preloaded
    parent = process_of(report(out["trace_path"]), out["pid"])
    labels = [marker["label"] for marker in parent["markers"]]
    assert labels == [
        "first marker",
        "epoch 3",
        "end of epoch 3",
        "failing phase",
        "end of failing phase (raised KeyError)",
        "decorated",
        "end of decorated",
        "\u00e9" * 511,
    ]
    # The same markers as the trace reader decodes them.
    dump = json.loads(
        subprocess.run(
            [build_file("GPULEAK_TEST_DUMP"), "--json", out["trace_path"]],
            check=True, stdout=subprocess.PIPE, universal_newlines=True,
        ).stdout
    )
    strings = {entry["id"]: entry["text"] for entry in dump["strings"]}
    marker_events = [event for event in dump["notable"]["events"] if event["type"] == "marker"]
    assert [strings[event["address"]] for event in marker_events] == labels
    assert {event["thread_id"] for event in marker_events} == {out["pid"]}
    # The isolated children allocated; the parent did not.
    assert parent["summary"]["peak_reserved_bytes"] == 0


def test_preloaded_isolated_child_has_its_own_trace_with_the_leak(preloaded):
    out, directory = preloaded
    child = out["isolated"]
    assert child["returned"] and child["exitcode"] == 0 and child["address"]
    assert child["pid"] != out["pid"]
    assert child["trace_path"] == str(directory / ("trace.%d" % child["pid"]))
    assert child["trace_path"] != out["trace_path"] and os.path.isfile(child["trace_path"])
    assert child["report_error"] == ""

    process = child["process"]
    assert process["pid"] == child["pid"] and process["ended"]["how"] == "exit"
    assert process["summary"]["final_reserved_bytes"] == 3 << 20
    assert process["summary"]["peak_reserved_bytes"] == 3 << 20
    assert sum(leak["bytes"] for leak in process["leaks"]) == 3 << 20
    assert [marker["label"] for marker in process["markers"]] == [
        "isolated gpuleak_package_targets.leak",
        "end of isolated gpuleak_package_targets.leak",
    ]
    # What isolated() exposes is what gpuleak-report says of that trace.
    assert process == process_of(report(child["trace_path"]), child["pid"])

    summary = child["summary"]
    assert "\n" not in summary and summary == child["str"]
    assert summary.startswith("gpuleak_package_targets.leak in pid %d: " % child["pid"])
    assert "peak reserved 3.0 MiB" in summary and "3.0 MiB still reserved at the end" in summary
    assert process["diagnosis"]["kind"] in summary and child["trace_path"] in summary


def test_preloaded_isolated_exception_comes_back(preloaded):
    out, _ = preloaded
    raised = out["raised"]
    assert raised["type"] == "ValueError" and raised["message"] == "boom in the child"
    assert "ValueError: boom in the child" in raised["cause"]
    assert raised["trace_path"] not in (None, out["trace_path"], out["isolated"]["trace_path"])
    assert os.path.isfile(raised["trace_path"])


def test_preloaded_child_records_even_when_ld_preload_was_dropped(preloaded):
    out, _ = preloaded
    dropped = out["without_preload"]
    assert dropped["trace_path"] is not None and os.path.isfile(dropped["trace_path"])
    assert "gpuleak" in dropped["child"]["ld_preload"]
    assert dropped["restored"] is False


def test_preloaded_report_is_found_beside_the_library(preloaded):
    out, _ = preloaded
    assert out["report_beside_library"] == os.path.normpath(build_file("GPULEAK_TEST_REPORT"))


def test_the_previous_kernels_death_is_read_only_from_gpuleaks_own_state_directory(tmp_path, monkeypatch):
    from gpuleak import _notebook

    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    runs = tmp_path / "state" / "gpuleak" / "kernels" / "kernel-1" / "run"
    runs.mkdir(parents=True)
    summary = runs / "kernel-death.txt"
    summary.write_text("the kernel was killed by SIGKILL\n")
    monkeypatch.setenv(_notebook.PREVIOUS_DEATH_VARIABLE, str(summary))
    assert "the kernel was killed by SIGKILL" in _notebook.previous_death_banner()
    # A file elsewhere, named by whoever set the variable, is never shown.
    elsewhere = tmp_path / "secret"
    elsewhere.write_text("not for the notebook\n")
    monkeypatch.setenv(_notebook.PREVIOUS_DEATH_VARIABLE, str(elsewhere))
    assert _notebook.previous_death_banner() == ""
    monkeypatch.setenv(_notebook.PREVIOUS_DEATH_VARIABLE, str(runs / ".." / ".." / ".." / ".." / ".." / "secret"))
    assert _notebook.previous_death_banner() == ""
    # Nor what a link or a FIFO in the state directory leads to; a FIFO does not block the kernel's start.
    link = runs / "link.txt"
    link.symlink_to(elsewhere)
    monkeypatch.setenv(_notebook.PREVIOUS_DEATH_VARIABLE, str(link))
    assert _notebook.previous_death_banner() == ""
    fifo = runs / "fifo.txt"
    os.mkfifo(fifo)
    monkeypatch.setenv(_notebook.PREVIOUS_DEATH_VARIABLE, str(fifo))
    assert _notebook.previous_death_banner() == ""
