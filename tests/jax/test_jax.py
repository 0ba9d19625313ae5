"""Real JAX (the pinned jax and CUDA 13 plugin that scripts/setup-jax.sh installs) on the simulated CUDA
device: XLA must start, compile and run jitted and differentiated code there, and gpuleak run must say
what a JAX program holds. Each program runs in a fresh interpreter of that environment.

Environment: GPULEAK_TEST_SIMDEVICE_DIR (the simulated device's libraries and its python/; required),
GPULEAK_TEST_LAUNCHER (the gpuleak program), GPULEAK_JAX_DIR (the environment; default: what
scripts/setup-jax.sh made), GPULEAK_CUDA_LIB_DIR (the CUDA 13 toolkit's libraries; default
/usr/local/cuda/lib64). Missing ones skip every test, saying which.
"""

import json
import os
import sys

import pytest
from torch_environment import jax_python, run_json_program, run_under_gpuleak, simulated_device_environment

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "analyzer", "render", "json"))
from report_schema import assert_valid_report  # noqa: E402

MiB = 1 << 20
GiB = 1 << 30
CAPACITY = 4 * GiB
HERE = os.path.dirname(os.path.abspath(__file__))
PROGRAMS = os.path.join(HERE, "programs")
SIMDEVICE_DIR = os.environ.get("GPULEAK_TEST_SIMDEVICE_DIR", "")
CUDA_LIB_DIR = os.environ.get("GPULEAK_CUDA_LIB_DIR", "/usr/local/cuda/lib64")
LAUNCHER = os.environ.get("GPULEAK_TEST_LAUNCHER", "")
# The gpuleak package, as if the user had installed it.
PACKAGE = os.path.normpath(os.path.join(HERE, "..", "..", "python"))
JAX_PYTHON = jax_python()

pytestmark = [
    pytest.mark.skipif(
        not os.path.exists(os.path.join(SIMDEVICE_DIR, "libcudart.so.13")),
        reason="GPULEAK_TEST_SIMDEVICE_DIR does not hold the simulated libcudart.so.13",
    ),
    pytest.mark.skipif(JAX_PYTHON is None, reason="no JAX environment: run scripts/setup-jax.sh (or set GPULEAK_JAX_DIR)"),
    pytest.mark.skipif(
        not os.path.exists(os.path.join(CUDA_LIB_DIR, "libcublas.so.13")),
        reason=f"no CUDA 13 toolkit libraries in {CUDA_LIB_DIR} (set GPULEAK_CUDA_LIB_DIR)",
    ),
    pytest.mark.skipif(not os.path.exists(LAUNCHER), reason="GPULEAK_TEST_LAUNCHER does not name gpuleak"),
]


def environment(**settings):
    """The variables of a JAX program on the simulated device, with XLA's own `settings`."""
    variables = {
        name: value
        for name, value in os.environ.items()
        if not name.startswith(("XLA_", "JAX_", "TF_"))
    }
    variables.update(simulated_device_environment(SIMDEVICE_DIR, CUDA_LIB_DIR, CAPACITY))
    variables.update(settings)
    return variables


def run_program(program, **settings):
    """Runs the Python `program`, which prints one JSON line last; it must end normally."""
    return run_json_program(JAX_PYTHON, program, environment(**settings))[0]


def run_traced(directory, name, **settings):
    """Runs programs/`name` as a user would under gpuleak run; returns its process's report, the text
    report and what gpuleak run said at the end."""
    (process,), text, completed = run_under_gpuleak(
        LAUNCHER, JAX_PYTHON, os.path.join(PROGRAMS, name), directory, environment(**settings)
    )
    assert_valid_report(directory / "report.json")
    # The summary's paragraphs, each on one line (gpuleak run wraps them at 100 columns).
    return process, text, completed.stderr.replace("\n         ", " ")


def own_line(site, program):
    """The text of the line of `program` (a file of programs/) nearest the allocation in `site`'s stack."""
    script = os.path.join(PROGRAMS, program)
    own = next(frame for frame in site["frames"] if frame.get("python") and frame["file"] == script)
    with open(script) as source:
        return source.read().splitlines()[own["line"] - 1].strip()


def test_jit_and_grad_run_on_the_simulated_gpu_and_memory_is_counted():
    measured = run_program(
        """
        import json
        import jax
        import jax.numpy as jnp

        device = jax.devices()[0]
        loss = lambda w, x: jnp.sum((x @ w) ** 2)
        gradient = jax.jit(jax.grad(loss))
        w = jnp.ones((64, 64))
        for _ in range(3):
            w = w - 0.1 * gradient(w, jnp.ones((8, 64)))
        w.block_until_ready()
        before = device.memory_stats()["bytes_in_use"]
        kept = [jnp.zeros((1024, 1024), jnp.float32) for _ in range(8)]
        jax.block_until_ready(kept)
        stats = device.memory_stats()
        print(json.dumps({"platform": device.platform, "count": jax.device_count(), "before": before,
                          "after": stats["bytes_in_use"], "shape": list(w.shape),
                          "copied": jax.device_get(jnp.asarray([1.0, 2.0, 3.0])).tolist()}))
        """,
        XLA_PYTHON_CLIENT_PREALLOCATE="false",
    )
    assert measured["platform"] == "gpu"
    assert measured["count"] == 1
    assert measured["shape"] == [64, 64]
    # Eight arrays of 4 MiB each, in XLA's own count.
    assert measured["after"] - measured["before"] >= 8 * 4 * MiB
    # Kernels compute nothing on the simulated device, but copies keep what they copy: an array made on
    # the host reads back.
    assert measured["copied"] == [1.0, 2.0, 3.0]


def test_xla_takes_three_quarters_of_the_device_at_its_first_operation_by_default():
    measured = run_program(
        """
        import json
        import jax.numpy as jnp
        import jax

        jnp.zeros(1).block_until_ready()
        print(json.dumps({"pool": jax.devices()[0].memory_stats()["pool_bytes"]}))
        """
    )
    assert measured["pool"] == pytest.approx(0.75 * CAPACITY, rel=0.01)


def test_an_array_kept_per_step_is_a_leak_at_the_line_that_made_it(tmp_path):
    process, text, said = run_traced(tmp_path, "train_keeps_batches.py", XLA_PYTHON_CLIENT_ALLOCATOR="platform")
    assert process["diagnosis"]["kind"] == "leak", process["diagnosis"]["text"]
    top = process["growth"][0]
    script = os.path.join(PROGRAMS, "train_keeps_batches.py")
    own = next(frame for frame in top["frames"] if frame.get("python") and frame["file"] == script)
    assert own_line(top, "train_keeps_batches.py") == "x = jnp.full((512, 256), float(step))"
    # JAX freed them all as the process exited; the report counts what the loop left, as it ended.
    assert top["freed_at_exit_bytes"] == top["bytes"]
    assert "freed only as the process exited" in text
    assert "top leak origin: %s:%d in <module>: " % (script, own["line"]) in said
    assert "still held as its code ended" in said


def leak_with_each_array_its_own(directory, name):
    """The report of programs/`name` run with each array an allocation of its own (XLA's platform
    allocator), which must call it a leak."""
    process, _, _ = run_traced(
        directory, name, XLA_PYTHON_CLIENT_PREALLOCATE="false", XLA_PYTHON_CLIENT_ALLOCATOR="platform"
    )
    assert process["diagnosis"]["kind"] == "leak", process["diagnosis"]["text"]
    return process


def test_jitted_functions_kept_in_a_list_keep_the_arrays_they_close_over(tmp_path):
    process = leak_with_each_array_its_own(tmp_path, "keeps_predictors.py")
    diagnosis = process["diagnosis"]
    top = process["growth"][0]
    assert own_line(top, "keeps_predictors.py") == "weights = weights * 0.9"
    # What keeps them: the list, through each jitted function's closure, as gpuleak.why() found it at exit
    # (each array is a mapping of physical memory, found by the address the program's arrays hold).
    (site,) = [site for site in process["leaks"] if site["where"] == top["where"] and site["growing"]]
    held = site["held_by"][0]
    assert held["root"] == "`predictors`, a list with 24 items in __main__"
    assert held["path"].startswith("predictors[") and ".__closure__[0].cell_contents" in held["path"]
    assert held["bytes"] >= 0.9 * site["bytes"]
    words = " ".join(diagnosis["text"].split())
    assert "held by `predictors`, a list with 24 items in __main__" in words
    assert "A function defined in a loop or a callback keeps what it closes over" in words


def test_pullbacks_kept_in_a_list_keep_what_their_forward_pass_saved(tmp_path):
    process = leak_with_each_array_its_own(tmp_path, "keeps_pullbacks.py")
    diagnosis = process["diagnosis"]
    # Each step's input and what jax.vjp saved of the forward pass in `loss`, each held by the list.
    lines = sorted(own_line(site, "keeps_pullbacks.py") for site in process["growth"])
    assert lines == ["return jnp.mean(jnp.tanh(x @ w) ** 2)"] * 2 + ["x = jnp.ones((1024, 512)) * step"]
    growing = [site for site in process["leaks"] if site["growing"]]
    assert len(growing) == 3
    for site in growing:
        held = site["held_by"][0]
        assert held["root"] == "`pullbacks`, a list with 24 items in __main__"
        assert held["bytes"] >= 0.9 * site["bytes"]
    words = " ".join(diagnosis["text"].split())
    assert "A pullback of `jax.vjp` keeps every array its forward pass saved for it" in words


def test_the_same_loop_keeping_nothing_is_stable(tmp_path):
    process, _, _ = run_traced(tmp_path, "train_steady.py", XLA_PYTHON_CLIENT_ALLOCATOR="platform")
    assert process["diagnosis"]["kind"] == "stable", process["diagnosis"]["text"]


def test_xla_s_preallocated_pool_is_explained_not_called_a_leak(tmp_path):
    process, text, said = run_traced(tmp_path, "train_keeps_batches.py")
    diagnosis = process["diagnosis"]
    assert diagnosis["kind"] == "stable", diagnosis["text"]
    pool = diagnosis["framework_pool"]
    assert pool["framework"] == "jax"
    assert pool["regions"] == 1
    assert pool["bytes"] == pytest.approx(0.75 * CAPACITY, rel=0.01)
    assert pool["capacity_bytes"] == CAPACITY
    words = " ".join(diagnosis["text"].split())
    assert "XLA (JAX) reserved 3.0 GiB, 75% of device 0's 4.0 GiB, as its own pool" in words
    assert "XLA_PYTHON_CLIENT_PREALLOCATE=false XLA_PYTHON_CLIENT_ALLOCATOR=platform" in words
    assert process["growth"] == []
    assert "XLA's pool for JAX's arrays" in text
    # gpuleak run's last words name it as the pool it is.
    assert "most held as its code ended: " in said
    assert "(XLA's pool for JAX's arrays, which XLA hands out inside it, out of gpuleak's sight)" in said


def test_a_pool_xla_grows_as_it_needs_is_a_pool_too(tmp_path):
    process, _, _ = run_traced(tmp_path, "train_keeps_batches.py", XLA_PYTHON_CLIENT_PREALLOCATE="false")
    diagnosis = process["diagnosis"]
    assert diagnosis["kind"] == "stable", diagnosis["text"]
    assert diagnosis["framework_pool"]["framework"] == "jax"
    assert diagnosis["framework_pool"]["regions"] > 1
    assert process["growth"] == []


def test_isolated_trials_take_xla_s_pool_with_them(tmp_path):
    environment_settings = {"PYTHONPATH": os.pathsep.join([PACKAGE, environment()["PYTHONPATH"]])}
    listed, _, completed = run_under_gpuleak(
        LAUNCHER, JAX_PYTHON, os.path.join(PROGRAMS, "search_isolated.py"), tmp_path,
        environment(**environment_settings),
    )
    trials = [json.loads(line) for line in completed.stdout.splitlines()]
    assert [trial["result"] for trial in trials] == [64, 256]
    for trial in trials:
        # Each child's own trace, and its report back in the parent: the pool was the child's.
        assert os.path.dirname(trial["trace"]) == str(tmp_path)
        assert trial["diagnosis"]["framework_pool"]["framework"] == "jax"
        assert trial["diagnosis"]["kind"] == "stable"
    assert_valid_report(tmp_path / "report.json")
    processes = {process["pid"]: process for process in listed}
    children = {trial["pid"] for trial in trials}
    (search,) = [process for pid, process in processes.items() if pid not in children and process["role"]["kind"] == "program"]
    # The search never initialised the device: it held no device memory at all.
    assert search["summary"]["peak_reserved_bytes"] == 0
