"""Real PyTorch under libgpuleak.so with the PyTorch adapter (torch_adapter/): the report's allocated and
reserved bytes must be PyTorch's own numbers, read inside the script, and its diagnosis and leak origin
must be right. Each scenario runs in a fresh interpreter of the environment scripts/setup-torch.sh
installs, on the simulated device, and prints one JSON line of PyTorch's numbers; the adapter is built
once per session into a temporary cache by torch_adapter/build-adapter.sh.

Environment: GPULEAK_TEST_LIBRARY (libgpuleak.so), GPULEAK_TEST_REPORT (gpuleak-report),
GPULEAK_TEST_SIMDEVICE_DIR (the simulated device), GPULEAK_TORCH_DIR and
GPULEAK_CUDA_LIB_DIR as in test_torch_simdevice.py. Missing ones skip every test, saying which.
GPULEAK_TEST_TORCH_PYTHON names the scenarios' interpreter directly (any with torch importable), and
GPULEAK_TEST_ADAPTER_DIR a cache for the adapter kept between runs.
GPULEAK_TEST_REAL_DEVICE=1 runs the scenarios on the machine's real GPU instead (scripts/gpu-validate.sh,
through scenario_runner.py where pytest is missing): no simulated device, torch's own CUDA libraries,
and the scenarios that need the simulated device's capacity or second device are skipped.
"""

import json
import os
import pickle
import pickletools
import subprocess
import sys
import textwrap

import pytest
from torch_environment import simulated_device_environment, torch_python

MiB = 1 << 20
GiB = 1 << 30
CAPACITY = 4 * GiB
HERE = os.path.dirname(os.path.abspath(__file__))
# The adapter's build script: in the source tree, or installed under share/gpuleak in
# scripts/pack-build.sh's package.
BUILD_ADAPTER = next(
    path
    for path in (
        os.path.join(HERE, "..", "..", "torch_adapter", "build-adapter.sh"),
        os.path.join(HERE, "..", "..", "share", "gpuleak", "torch_adapter", "build-adapter.sh"),
    )
    if os.path.exists(path)
)


LIBRARY = os.environ.get("GPULEAK_TEST_LIBRARY", "")
REPORT = os.environ.get("GPULEAK_TEST_REPORT", "")
# The gpuleak Python package, for scripts that import it as if the user had installed it: in the source
# tree, or in scripts/pack-build.sh's package, where it lives under share/gpuleak.
PACKAGE = next(
    path
    for path in (os.path.join(HERE, "..", "..", "python"), os.path.join(HERE, "..", "..", "share", "gpuleak", "python"))
    if os.path.isdir(os.path.join(path, "gpuleak"))
)
SIMDEVICE_DIR = os.environ.get("GPULEAK_TEST_SIMDEVICE_DIR", "")
CUDA_LIB_DIR = os.environ.get("GPULEAK_CUDA_LIB_DIR", "/usr/local/cuda/lib64")
TORCH_PYTHON = os.environ.get("GPULEAK_TEST_TORCH_PYTHON") or torch_python()
REAL_DEVICE = os.environ.get("GPULEAK_TEST_REAL_DEVICE") == "1"

pytestmark = [
    pytest.mark.skipif(not os.path.exists(LIBRARY), reason="GPULEAK_TEST_LIBRARY does not name libgpuleak.so"),
    pytest.mark.skipif(not os.path.exists(REPORT), reason="GPULEAK_TEST_REPORT does not name gpuleak-report"),
    pytest.mark.skipif(
        not REAL_DEVICE and not os.path.exists(os.path.join(SIMDEVICE_DIR, "libcudart.so.13")),
        reason="GPULEAK_TEST_SIMDEVICE_DIR does not hold the simulated libcudart.so.13",
    ),
    pytest.mark.skipif(
        TORCH_PYTHON is None,
        reason="no PyTorch environment: run scripts/setup-torch.sh (or set GPULEAK_TORCH_DIR)",
    ),
    pytest.mark.skipif(
        not REAL_DEVICE and not os.path.exists(os.path.join(CUDA_LIB_DIR, "libcublas.so.13")),
        reason=f"no CUDA 13 toolkit libraries in {CUDA_LIB_DIR} (set GPULEAK_CUDA_LIB_DIR)",
    ),
]
# A 4 GiB capacity to run out of, and a second device: only the simulated device has them for sure.
SIMULATED_ONLY = pytest.mark.skipif(REAL_DEVICE, reason="needs the simulated device")

# The scenarios' common start: PyTorch's numbers, printed as the script's last line.
PRELUDE = """\
import gc, json, os, threading, time, torch
def torch_numbers(**more):
    print(json.dumps(dict(allocated=torch.cuda.memory_allocated(), reserved=torch.cuda.memory_reserved(),
                          max_allocated=torch.cuda.max_memory_allocated(),
                          max_reserved=torch.cuda.max_memory_reserved(), **more)), flush=True)
"""


@pytest.fixture(scope="session")
def adapter_cache(tmp_path_factory):
    # GPULEAK_TEST_ADAPTER_DIR: a cache kept between runs (a changed adapter is built under a new name).
    cache = os.environ.get("GPULEAK_TEST_ADAPTER_DIR") or str(tmp_path_factory.mktemp("torch-adapter"))
    built = subprocess.run(
        [BUILD_ADAPTER, TORCH_PYTHON],
        # gpuleak's own tests hold the adapter to -Werror; a user's build does not.
        env=dict(os.environ, GPULEAK_TORCH_ADAPTER_DIR=cache, CXXFLAGS="-Werror"),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert built.returncode == 0, built.stderr
    assert os.path.exists(built.stdout.strip())
    return cache


class Run:
    def __init__(self, completed, process, path, trace):
        self.trace = trace
        self.stdout = completed.stdout
        self.stderr = completed.stderr
        self.numbers = json.loads(completed.stdout.strip().splitlines()[-1])
        self.process = process
        self.path = path
        self.summary = process["summary"]
        self.device = process["summary"]["devices"][0] if process["summary"]["devices"] else {}


def run_traced(tmp_path, body, adapter_cache, **env):
    """Runs PRELUDE + `body` as a script file under libgpuleak.so and returns its numbers and report."""
    script = tmp_path / "scenario.py"
    script.write_text(PRELUDE + textwrap.dedent(body))
    trace = tmp_path / "scenario.trace"
    environment = dict(os.environ)
    environment.pop("PYTORCH_CUDA_ALLOC_CONF", None)
    environment.update(
        LD_PRELOAD=LIBRARY,
        GPULEAK_OUTPUT=str(trace),
        GPULEAK_QUIET="1",
        GPULEAK_TORCH_ADAPTER_DIR=adapter_cache,
        PYTHONWARNINGS="ignore",
    )
    if not REAL_DEVICE:
        environment.update(simulated_device_environment(SIMDEVICE_DIR, CUDA_LIB_DIR, CAPACITY))
    environment.update(env)
    completed = subprocess.run(
        [TORCH_PYTHON, str(script)], env=environment, capture_output=True, text=True, timeout=240
    )
    assert completed.returncode == 0, completed.stderr[-4000:]
    report = subprocess.run(
        [REPORT, "--format", "json", "--no-symbol-cache", str(trace)], capture_output=True, text=True, timeout=240
    )
    assert report.returncode == 0, report.stderr
    return Run(completed, json.loads(report.stdout)["processes"][0], str(script), str(trace))


def assert_torch_numbers(run):
    """The report's allocated and reserved bytes are PyTorch's own, peak and at the end."""
    numbers = run.numbers
    assert run.summary["allocator_reports_blocks"] is True
    assert run.device["peak_allocated_bytes"] == numbers["max_allocated"]
    assert run.device["final_allocated_bytes"] == numbers["allocated"]
    assert run.device["peak_reserved_bytes"] == numbers["max_reserved"]
    assert run.device["final_reserved_bytes"] == numbers["reserved"]


def python_lines(frames, path):
    return [frame["line"] for frame in frames if frame["python"] and frame["file"] == path]


def leak_origin(run):
    """The largest growing site of tensors (blocks): the list also has the segments' sites."""
    return next(site for site in run.process["leaks"] if site["kind"] == "block" and site["growing"])


def line_of(run, text):
    """The 1-based line of the script that contains `text`."""
    with open(run.path) as script:
        lines = script.read().splitlines()
    return next(number for number, line in enumerate(lines, 1) if text in line)


# A training-like loop: forward with elementwise kernels, 20 steps that each keep their output.
LEAKY_LOOP = """
weights = torch.randn(512, 512, device="cuda")
history = []
for step in range(20):
    batch = torch.randn(256, 512, device="cuda")
    output = (batch * weights[:256]).relu()
    history.append(output.detach().clone())   # keeps every step's output: 512 KiB
torch_numbers()
"""


def test_leak_appended_outputs(tmp_path, adapter_cache):
    run = run_traced(tmp_path, LEAKY_LOOP, adapter_cache)
    assert_torch_numbers(run)
    assert run.process["diagnosis"]["kind"] == "leak"
    assert python_lines(leak_origin(run)["frames"], run.path)[0] == line_of(run, "history.append")
    assert f"{run.path}:{line_of(run, 'history.append')}" in run.process["diagnosis"]["text"]
    # The output stays on stdout untouched: gpuleak writes nothing there.
    assert len(run.stdout.strip().splitlines()) == 1
    assert "gpuleak" not in run.stderr


def test_stable_with_del_gc_and_empty_cache(tmp_path, adapter_cache):
    body = LEAKY_LOOP.replace(
        "torch_numbers()", "del history, output, weights\ngc.collect()\ntorch.cuda.empty_cache()\ntorch_numbers()"
    ).replace("history.append(output.detach().clone())", "del batch  #")
    run = run_traced(tmp_path, body, adapter_cache)
    assert run.numbers["allocated"] == 0 and run.numbers["reserved"] == 0
    assert_torch_numbers(run)
    assert run.process["diagnosis"]["kind"] == "stable"


def test_varying_sizes_grow_the_cache_not_allocated(tmp_path, adapter_cache):
    run = run_traced(
        tmp_path,
        """
        for step in range(12):
            scratch = torch.empty((step + 1) * 3 * (1 << 20), dtype=torch.uint8, device="cuda")
            scratch.fill_(1)
            del scratch
        torch_numbers()
        """,
        adapter_cache,
    )
    assert run.numbers["allocated"] == 0 and run.numbers["reserved"] > 64 * MiB
    assert_torch_numbers(run)
    assert run.process["diagnosis"]["kind"] == "cache_growth"


MODEL_LOOP = """
registry = []
def build():
    return torch.nn.Sequential(torch.nn.Linear(1024, 1024), torch.nn.ReLU(), torch.nn.Linear(1024, 256))
for trial in range(10):
    model = build().cuda()   # the previous model stays in the registry
    registry.append(model)
torch_numbers()
"""


def test_model_recreated_without_freeing_the_previous(tmp_path, adapter_cache):
    run = run_traced(tmp_path, MODEL_LOOP, adapter_cache)
    assert_torch_numbers(run)
    assert line_of(run, "model = build().cuda()") in python_lines(run.process["leaks"][0]["frames"], run.path)


def test_model_recreated_is_diagnosed_a_leak(tmp_path, adapter_cache):
    # The loop does nothing but make models, as a model's making does nothing but make parameters: what
    # tells it from set-up is what gpuleak.why() finds at exit (the package importable, as under gpuleak
    # run), a list that holds ten models.
    run = run_traced(tmp_path, MODEL_LOOP, adapter_cache, PYTHONPATH=PACKAGE)
    assert run.process["diagnosis"]["kind"] == "leak", run.process["diagnosis"]["text"]
    assert "held by `registry`, a list with 10 items" in run.process["diagnosis"]["text"]


# The same loop at any speed, with or without idling before and after it, gets the same verdict and
# the same top site: each step makes a 4 MiB temporary and keeps a 256 KiB tensor (seconds per step,
# seconds of idling before and after).
SPEEDS = {"no sleep": (0, 0), "10 ms steps, 2 s idle around": (0.01, 2), "200 ms steps": (0.2, 0)}


@pytest.mark.parametrize("speed", sorted(SPEEDS))
def test_verdict_at_any_speed(tmp_path, adapter_cache, speed):
    step, idle = SPEEDS[speed]
    run = run_traced(
        tmp_path,
        f"""
        kept = []
        time.sleep({idle})
        for step in range(40):
            temporary = torch.empty(4 << 20, dtype=torch.uint8, device="cuda")
            kept.append(torch.empty(256 << 10, dtype=torch.uint8, device="cuda"))
            del temporary
            time.sleep({step})
        time.sleep({idle})
        torch_numbers()
        """,
        adapter_cache,
    )
    assert_torch_numbers(run)
    assert run.process["diagnosis"]["kind"] == "leak", run.process["diagnosis"]["text"]
    (top, *_) = run.process["growth"]
    assert top["bytes"] == 40 * (256 << 10) and top["kind"] == "block"
    assert python_lines(top["frames"], run.path)[0] == line_of(run, "kept.append")


def test_one_kept_batch_and_a_small_cache_are_stable(tmp_path, adapter_cache):
    run = run_traced(
        tmp_path,
        """
        from torch.utils.data import DataLoader, TensorDataset
        loader = DataLoader(TensorDataset(torch.randn(512, 1 << 16)), batch_size=16)
        first = None
        for (batch,) in loader:
            x = batch.to("cuda")
            y = (x * 2).relu()
            if first is None:
                first = y   # one 4 MiB tensor, kept on purpose
        torch_numbers()
        """,
        adapter_cache,
    )
    assert_torch_numbers(run)
    assert run.numbers["reserved"] - run.numbers["allocated"] >= 8 * MiB
    assert run.process["diagnosis"]["kind"] == "stable", run.process["diagnosis"]["text"]
    assert run.process["growth"] == []


def test_kept_pinned_batches_are_a_leak_named_by_the_loop_that_receives_them(tmp_path, adapter_cache):
    run = run_traced(
        tmp_path,
        """
        from torch.utils.data import DataLoader, TensorDataset
        loader = DataLoader(TensorDataset(torch.randn(1024, 64, 40)), batch_size=32, num_workers=2, pin_memory=True)
        kept = []
        for (batch,) in loader:
            x = batch.to("cuda", non_blocking=True)
            kept.append(batch)   # every pinned batch
        torch_numbers()
        """,
        adapter_cache,
        PYTHONPATH=PACKAGE,
    )
    assert run.process["diagnosis"]["kind"] == "leak", run.process["diagnosis"]["text"]
    (top, *_) = run.process["growth"]
    assert top["kind"] == "pinned_host" and top["count"] == 32
    # Pinned on PyTorch's pin-memory thread, which runs none of the program's code: named by the line that
    # started it, where the program receives the batches.
    loop = "%s:%d in <module>" % (run.path, line_of(run, "for (batch,) in loader"))
    assert top["where"] == loop + " (made there on a library's thread, in torch pin_memory)", top["where"]
    assert python_lines(top["thread_started_at"], run.path) == [line_of(run, "for (batch,) in loader")]
    text = " ".join(run.process["diagnosis"]["text"].split())
    assert top["where"] in text, text
    # What keeps them, as the program ended: the program's own list, which the text names.
    assert "of it held by `kept`, a list with 32 items in __main__." in text, text


# As in a notebook: one cell keeps a small slice of each of 50 16 MiB tensors (a view holds its whole
# base), the next runs out of memory. The tensors are the leak, and what held the memory at the failure.
SLICES_THEN_OUT_OF_MEMORY = """
import gpuleak
with gpuleak.phase("cell [1]"):
    kept = []
    for step in range(50):
        features = torch.empty(4 << 20, device="cuda")
        kept.append(features[:10])
with gpuleak.phase("cell [2]"):
    try:
        torch.empty(8 << 30, dtype=torch.uint8, device="cuda")
    except torch.OutOfMemoryError:
        pass
torch_numbers()
"""


@SIMULATED_ONLY
def test_kept_slices_are_the_leak_and_what_held_the_memory_at_the_failure(tmp_path, adapter_cache):
    run = run_traced(tmp_path, SLICES_THEN_OUT_OF_MEMORY, adapter_cache, PYTHONPATH=PACKAGE)
    assert_torch_numbers(run)
    assert run.process["diagnosis"]["kind"] == "leak", run.process["diagnosis"]["text"]
    (top, *_) = run.process["growth"]
    assert top["kind"] == "block" and top["bytes"] == 50 * 16 * MiB
    made = line_of(run, "features = torch.empty")
    assert python_lines(top["frames"], run.path)[0] == made
    (failure,) = run.process["failures"]
    assert python_lines(failure["top_sites_then"][0]["frames"], run.path)[0] == made


def test_expandable_segments(tmp_path, adapter_cache):
    run = run_traced(tmp_path, LEAKY_LOOP, adapter_cache, PYTORCH_CUDA_ALLOC_CONF="expandable_segments:True")
    assert_torch_numbers(run)
    assert run.process["diagnosis"]["kind"] == "leak"


@SIMULATED_ONLY
def test_out_of_memory(tmp_path, adapter_cache):
    run = run_traced(
        tmp_path,
        """
        held = [torch.empty(1 << 30, dtype=torch.uint8, device="cuda") for _ in range(3)]
        try:
            too_much = torch.empty(2 << 30, dtype=torch.uint8, device="cuda")
        except torch.OutOfMemoryError:
            pass
        torch_numbers()
        """,
        adapter_cache,
    )
    assert_torch_numbers(run)
    assert run.numbers["allocated"] == 3 * GiB
    failure = run.process["failures"][0]
    assert failure["bytes"] == 2 * GiB
    assert python_lines(failure["frames"], run.path)[0] == line_of(run, "too_much =")
    assert failure["reserved_bytes_then"] == 3 * GiB
    held_then = failure["top_sites_then"]
    assert line_of(run, "held = ") in python_lines(held_then[0]["frames"], run.path)
    # PyTorch's failed cudaMallocs (it empties its cache and tries again) and its OOM are one failure.
    assert len(run.process["failures"]) == 1
    assert run.summary["failed_allocations"] == 1
    assert failure["source"] == "allocator"
    assert failure["failed_cuda_allocations"] >= 1
    assert failure["error"] == 2  # cudaErrorMemoryAllocation


def test_out_of_memory_under_a_memory_fraction(tmp_path, adapter_cache):
    # The allocator refuses by its own cap: no CUDA call fails, and the device has room.
    run = run_traced(
        tmp_path,
        """
        total = torch.cuda.get_device_properties(0).total_memory
        torch.cuda.set_per_process_memory_fraction(64 * (1 << 20) / total)
        held = [torch.empty(16 << 20, dtype=torch.uint8, device="cuda") for _ in range(2)]
        try:
            too_much = torch.empty(64 << 20, dtype=torch.uint8, device="cuda")
        except torch.OutOfMemoryError:
            pass
        torch_numbers(free=torch.cuda.mem_get_info()[0])
        """,
        adapter_cache,
    )
    assert_torch_numbers(run)
    assert run.numbers["allocated"] == 32 * MiB
    assert len(run.process["failures"]) == 1
    failure = run.process["failures"][0]
    assert failure["source"] == "allocator"
    assert failure["kind"] == "block"
    assert failure["failed_cuda_allocations"] == 0
    assert failure["bytes"] == 64 * MiB
    assert failure["free_bytes"] == run.numbers["free"]
    assert python_lines(failure["frames"], run.path)[0] == line_of(run, "too_much =")
    assert failure["reserved_bytes_then"] == 32 * MiB
    held_then = failure["top_sites_then"]
    assert line_of(run, "held = ") in python_lines(held_then[0]["frames"], run.path)
    assert sum(site["bytes"] for site in held_then) >= 32 * MiB
    assert "no CUDA allocation failed" in run.process["diagnosis"]["text"]


def test_frees_on_another_thread(tmp_path, adapter_cache):
    run = run_traced(
        tmp_path,
        """
        tensors = [torch.empty(1 << 20, device="cuda") for _ in range(8)]
        kept = tensors[:2]
        def release():
            global tensors
            tensors = None          # frees six blocks on this thread, with the GIL held
        worker = threading.Thread(target=release)
        worker.start()
        worker.join()
        torch_numbers()
        """,
        adapter_cache,
    )
    assert run.numbers["allocated"] == 2 * 4 * MiB
    assert_torch_numbers(run)


def test_block_sizes_follow_the_allocator(tmp_path, adapter_cache):
    # Requests that are not multiples of 512 and large blocks the allocator hands out whole.
    run = run_traced(
        tmp_path,
        """
        a = torch.empty(3 * (1 << 20) + 1, dtype=torch.uint8, device="cuda")
        b = torch.empty(15 * (1 << 20) + 100, dtype=torch.uint8, device="cuda")   # leaves < 1 MiB: not split
        del a
        c = torch.empty(3 * (1 << 20) - 700, dtype=torch.uint8, device="cuda")
        d = torch.empty(12345, dtype=torch.uint8, device="cuda")
        torch_numbers()
        """,
        adapter_cache,
    )
    assert_torch_numbers(run)
    assert "disagree" not in run.stderr


def test_block_sizes_with_power_of_two_divisions(tmp_path, adapter_cache):
    # roundup_power2_divisions:4 rounds a request up to the next quarter step between two powers of two
    # where 512-byte rounding would give less: 4200 -> 5120 (not 4608), 9000 -> 10240 (not 9216),
    # 3 MiB + 1 -> 3.5 MiB, 5 MiB + 100 -> 6 MiB; requests of 2048 bytes or less keep 512-byte rounding.
    run = run_traced(
        tmp_path,
        """
        sizes = [700, 4200, 9000, 100000, 3 * (1 << 20) + 1, 5 * (1 << 20) + 100, 12345678]
        kept = [torch.empty(size, dtype=torch.uint8, device="cuda") for size in sizes]
        del kept[1], kept[-3]
        kept += [torch.empty(size + 1000, dtype=torch.uint8, device="cuda") for size in sizes]
        before = torch.cuda.memory_allocated()
        kept.append(torch.empty(9000, dtype=torch.uint8, device="cuda"))
        torch_numbers(block_of_9000=torch.cuda.memory_allocated() - before)
        """,
        adapter_cache,
        PYTORCH_CUDA_ALLOC_CONF="roundup_power2_divisions:4",
    )
    assert run.numbers["block_of_9000"] == 10240  # the setting took effect
    assert_torch_numbers(run)
    assert "disagree" not in run.stderr


def test_many_blocks_at_once(tmp_path, adapter_cache):
    # Thousands of blocks held together, freed out of order and reallocated: the adapter's table of
    # blocks grows several times and closes many gaps; a block it lost would be counted forever.
    run = run_traced(
        tmp_path,
        """
        held = [torch.empty(512 * (1 + i % 7), dtype=torch.uint8, device="cuda") for i in range(6000)]
        for step in range(3):
            del held[step::3]
            held += [torch.empty(700 * (1 + i % 5), dtype=torch.uint8, device="cuda") for i in range(3000)]
        del held[::2]
        torch_numbers()
        """,
        adapter_cache,
    )
    assert_torch_numbers(run)
    assert "disagree" not in run.stderr


def test_hundreds_of_thousands_of_small_tensors_kept(tmp_path, adapter_cache):
    # The typical long leak: a small tensor kept every step, 400,000 of them, each step working in a
    # temporary of its own. The report's numbers are PyTorch's, and the site that kept them holds every
    # one, also in the smallest trace, whose live table holds only some of them one by one.
    body = """
        kept = []
        for step in range(400000):
            kept.append(torch.ones(1, device="cuda") * step)  # kept site
        torch_numbers(kept=len(kept))
        """
    for max_mb, spilled in (("256", False), ("4", True)):
        directory = tmp_path / max_mb
        directory.mkdir()
        run = run_traced(directory, body, adapter_cache, GPULEAK_MAX_MB=max_mb)
        assert_torch_numbers(run)
        assert run.numbers["allocated"] == 400000 * 512
        leak = run.process["growth"][0]
        assert leak["count"] == 400000 and leak["bytes"] == 400000 * 512
        assert python_lines(leak["frames"], run.path)[0] == line_of(run, "# kept site")
        assert run.process["diagnosis"]["kind"] == "leak"
        exactness = run.summary["exactness"]
        assert (exactness["spilled"] > 0) == spilled
        assert exactness["untracked"] == 0 and exactness["unattributed"] == 0


@SIMULATED_ONLY
def test_two_devices(tmp_path, adapter_cache):
    run = run_traced(
        tmp_path,
        """
        x = torch.empty(1 << 20, device="cuda:0")
        y = torch.empty(3 << 20, device="cuda:1")
        del x
        torch_numbers(allocated1=torch.cuda.memory_allocated(1))
        """,
        adapter_cache,
        GPULEAK_SIM_DEVICES="2",
    )
    devices = {device["device"]: device for device in run.summary["devices"]}
    assert devices[0]["final_allocated_bytes"] == run.numbers["allocated"] == 0
    assert devices[1]["final_allocated_bytes"] == run.numbers["allocated1"] == 12 * MiB


def test_without_an_adapter_one_warning_and_segments(tmp_path, adapter_cache):
    empty = tmp_path / "no-adapter"
    empty.mkdir()
    run = run_traced(tmp_path, LEAKY_LOOP, str(empty))
    warnings = [line for line in run.stderr.splitlines() if line.startswith("gpuleak:")]
    assert len(warnings) == 1 and "no PyTorch adapter" in warnings[0]
    assert run.summary["allocator_reports_blocks"] is False
    assert run.device["final_reserved_bytes"] == run.numbers["reserved"]


def test_gpuleak_torch_0_turns_it_off(tmp_path, adapter_cache):
    run = run_traced(tmp_path, LEAKY_LOOP, adapter_cache, GPULEAK_TORCH="0")
    assert "gpuleak" not in run.stderr
    assert run.summary["allocator_reports_blocks"] is False


def export_snapshot(run, tmp_path, *options):
    """`gpuleak-report --format torch-snapshot` of the run: the pickle's path."""
    snapshot = tmp_path / "snap.pickle"
    exported = subprocess.run(
        [REPORT, "--format", "torch-snapshot", "--no-symbol-cache", "-o", str(snapshot), *options, run.trace],
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert exported.returncode == 0, exported.stderr
    assert exported.stderr == ""
    return snapshot


def memory_viz(tmp_path, action, snapshot):
    """`python -m torch.cuda._memory_viz ACTION snapshot`, under the torch environment: its stdout."""
    out = tmp_path / f"{action}.html"
    arguments = [str(snapshot)] + (["-o", str(out)] if action.endswith("_plot") else [])
    viz = subprocess.run(
        [TORCH_PYTHON, "-m", "torch.cuda._memory_viz", action, *arguments],
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert viz.returncode == 0, viz.stderr[-4000:]
    if action.endswith("_plot"):
        assert out.stat().st_size > 0
    return viz.stdout


@pytest.mark.parametrize("conf", ["", "expandable_segments:True"])
def test_torch_snapshot_of_the_leak(tmp_path, adapter_cache, conf):
    env = {"PYTORCH_CUDA_ALLOC_CONF": conf} if conf else {}
    run = run_traced(tmp_path, LEAKY_LOOP, adapter_cache, **env)
    snapshot = export_snapshot(run, tmp_path)
    data = pickle.loads(snapshot.read_bytes())

    segments = data["segments"]
    assert segments and all(segment["device"] == 0 for segment in segments)
    assert all(segment["is_expandable"] == bool(conf) for segment in segments)
    for segment in segments:
        assert sum(block["size"] for block in segment["blocks"]) == segment["total_size"]
        address = segment["address"]
        for block in segment["blocks"]:  # the viewer places each block after the one before
            assert block["address"] == address
            address += block["size"]
    active = [block for segment in segments for block in segment["blocks"] if block["state"] == "active_allocated"]
    assert sum(block["size"] for block in active) == run.numbers["allocated"]
    assert sum(segment["total_size"] for segment in segments) == run.numbers["reserved"]
    # The leak's blocks name the line that keeps them, as the report does.
    leak_line = line_of(run, "history.append")
    kept = [block for block in active if any(frame["line"] == leak_line and frame["filename"] == run.path
                                             for frame in block["frames"])]
    assert len(kept) == 20

    (trace,) = data["device_traces"]
    actions = {entry["action"] for entry in trace}
    assert {"alloc", "free_requested", "free_completed"} <= actions
    assert ("segment_map" if conf else "segment_alloc") in actions
    assert all({"action", "addr", "size", "stream", "frames", "time_us"} <= entry.keys() for entry in trace)
    # Replaying the trace from an empty device ends where the segments say, when the ring holds it all.
    live = {}
    for entry in trace:
        if entry["action"] == "alloc":
            live[entry["addr"]] = entry["size"]
        elif entry["action"] == "free_completed":
            del live[entry["addr"]]
    assert sorted(live.items()) == sorted((block["address"], block["size"]) for block in active)

    stats = memory_viz(tmp_path, "stats", snapshot)
    assert f"segments: {len(segments)}" in stats
    assert memory_viz(tmp_path, "trace", snapshot).strip()
    # Its flame graphs (segments, memory) would download flamegraph.pl: not here.
    for action in ("trace_plot", "segment_plot"):
        memory_viz(tmp_path, action, snapshot)


def test_torch_snapshot_stays_within_what_the_web_viewer_reads(tmp_path, adapter_cache):
    """pytorch.org/memory_viz unpickles protocols 2 to 4 itself: no later opcode, no bytes objects, and no
    int of more than 8 bytes."""
    run = run_traced(tmp_path, MODEL_LOOP, adapter_cache)
    raw = export_snapshot(run, tmp_path, "--native").read_bytes()
    opcodes = list(pickletools.genops(raw))
    assert opcodes[0][0].name == "PROTO" and opcodes[0][1] == 4
    assert max(opcode.proto for opcode, _, _ in opcodes) <= 4
    assert not [opcode.name for opcode, _, _ in opcodes if "BYTES" in opcode.name or opcode.name == "FRAME"]
    assert all(argument is None or not isinstance(argument, bytes) for _, argument, _ in opcodes)
    longs = [argument for opcode, argument, _ in opcodes if opcode.name.startswith("LONG")]
    assert all(-(1 << 63) <= value < (1 << 63) for value in longs)
    assert all(opcode.name != "LONG4" for opcode, _, _ in opcodes)
    data = pickle.loads(raw)
    allocated = sum(block["size"] for segment in data["segments"] for block in segment["blocks"]
                    if block["state"] == "active_allocated")
    assert allocated == run.numbers["allocated"]


def test_torch_snapshot_needs_a_file(tmp_path, adapter_cache):
    run = run_traced(tmp_path, 'x = torch.empty(1, device="cuda")\ntorch_numbers()', adapter_cache)
    for output in ([], ["-o", "-"]):
        refused = subprocess.run(
            [REPORT, "--format", "torch-snapshot", *output, run.trace], capture_output=True, timeout=60
        )
        assert refused.returncode == 2
        assert refused.stdout == b""
        assert len(refused.stderr.decode().splitlines()) == 1 and b"-o FILE" in refused.stderr


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q"]))
