"""A notebook with real PyTorch in the "Python 3 (gpuleak)" kernel (`gpuleak kernel install --python` of the
PyTorch environment, which scripts/setup-torch.sh gives ipykernel): a cell's exception keeps the
activations of the function it went through alive in IPython's last traceback, `%gpuleak why` names that
traceback with how to drop it, and dropping it as it says gives the memory back; a notebook that keeps
slices of large tensors, runs out of memory and is killed is told, after its death, a leak held by its
list through the slices' bases.

Environment: that of test_workloads.py.
"""

import glob
import json
import os
import subprocess

import pytest
from test_torch_adapter import CUDA_LIB_DIR, SIMDEVICE_DIR, TORCH_PYTHON, MiB, adapter_cache  # noqa: F401 - a fixture
from test_workloads import HERE, LAUNCHER
from test_workloads import pytestmark as workload_marks
from torch_environment import simulated_device_environment

pytestmark = workload_marks + [
    pytest.mark.skipif(
        subprocess.run([TORCH_PYTHON or "false", "-c", "import ipykernel, jupyter_client"], capture_output=True).returncode
        != 0,
        reason="the PyTorch environment has no ipykernel (scripts/setup-torch.sh installs it)",
    )
]
KERNEL = "gpuleak-torch-test"
RUN_CELLS = os.path.join(HERE, "..", "jupyter", "run_cells.py")

MODEL = """\
import gc, sys, torch
from torch import nn

model = nn.Sequential(nn.Linear(256, 1024), nn.ReLU(), nn.Linear(1024, 10)).cuda()

def evaluate():
    activations = []
    for _ in range(4):
        activations.append(model(torch.randn(512, 256, device="cuda")))
    raise ValueError("a bad batch")
"""


def install_and_run(tmp_path, adapter_cache, cells):
    """Installs the kernelspec for the PyTorch environment and runs `cells` in its kernel: what each
    printed, and the environment (Jupyter's and gpuleak's directories under tmp_path)."""
    environment = dict(os.environ)
    environment.update(simulated_device_environment(SIMDEVICE_DIR, CUDA_LIB_DIR, 1 << 30))
    environment.update(
        {name: str(tmp_path / name) for name in ("JUPYTER_DATA_DIR", "JUPYTER_RUNTIME_DIR", "IPYTHONDIR", "XDG_STATE_HOME")},
        JUPYTER_PATH="",
        GPULEAK_TORCH_ADAPTER_DIR=adapter_cache,
        PYTHONWARNINGS="ignore",
    )
    installed = subprocess.run(
        [LAUNCHER, "kernel", "install", "--user", "--name", KERNEL, "--python", TORCH_PYTHON],
        env=environment, capture_output=True, text=True, timeout=60,
    )
    assert installed.returncode == 0, installed.stderr
    completed = subprocess.run(
        [TORCH_PYTHON, RUN_CELLS, KERNEL], input=json.dumps(cells), env=environment, capture_output=True,
        text=True, timeout=600,
    )
    assert completed.returncode == 0, completed.stderr[-4000:]
    return [json.loads(line) for line in completed.stdout.splitlines()], environment


def test_a_cells_exception_keeps_activations_until_its_traceback_is_dropped(tmp_path, adapter_cache):  # noqa: F811
    cells = [
        MODEL,  # cell [1]
        "evaluate()",  # cell [2]: raises
        "print(torch.cuda.memory_allocated())",
        "%gpuleak why",
        # What the advice says, both halves: sys's traceback, and the copy IPython's traceback printer keeps.
        "sys.last_traceback = sys.last_value = sys.last_exc = None\nget_ipython().InteractiveTB.tb = None\n"
        "gc.collect()\nprint(torch.cuda.memory_allocated())",
        "%gpuleak why",
    ]
    outputs, _ = install_and_run(tmp_path, adapter_cache, cells)
    assert [output["status"] for output in outputs] == ["ok", "error", "ok", "ok", "ok", "ok"], outputs
    assert "a bad batch" in outputs[1]["text"]
    held, why, released, after = (
        int(outputs[2]["text"]), outputs[3]["text"], int(outputs[4]["text"]), outputs[5]["text"]
    )
    # What the graphs of four batches saved: each batch's input and its ReLU's output (512 x 256 and
    # 512 x 1024, float32), at least.
    activations = 4 * (512 * 256 + 512 * 1024) * 4
    assert held - released >= activations, (held, released)
    lines = why.splitlines()
    (traceback,) = [line for line in lines if "held by the last exception's traceback (sys.last_" in line]
    # Where the activations were made: the notebook's own cell and line.
    assert "cell [1], line 9 (`activations.append(model(torch.randn(512, 256, device=\"cuda\")))`)" in traceback, why
    assert "`sys.last_traceback = sys.last_value = sys.last_exc = None` drops them" in why
    assert "in IPython also `get_ipython().InteractiveTB.tb = None`" in why
    assert "last exception's traceback" not in after, after


def test_a_notebook_that_keeps_slices_runs_out_of_memory_and_dies_is_told_a_leak_held_by_its_list(
    tmp_path, adapter_cache  # noqa: F811
):
    cells = [
        "import torch\nkept = []",  # cell [1]
        # Each slice keeps its whole 16 MiB tensor: 800 MiB of the 1 GiB device.
        'for step in range(50):\n    x = torch.randn(2048, 2048, device="cuda")\n    kept.append(x[:1])',
        "%gpuleak",
        'big = torch.empty(512 << 20, dtype=torch.uint8, device="cuda")',  # out of memory
        "# kills its kernel, as the OOM killer would\nimport os, signal\nos.kill(os.getpid(), signal.SIGKILL)",
        "print('restarted')",
    ]
    outputs, environment = install_and_run(tmp_path, adapter_cache, cells)
    assert [output["status"] for output in outputs] == ["ok", "ok", "ok", "error", "died", "ok"], outputs
    # The memory once, at the line that made the tensors, not again for the segments made for them.
    live = outputs[2]["text"]
    assert live.count("800.0 MiB in 50 allocations") == 1, live
    assert '800.0 MiB in 50 allocations: cell [2], line 2 (`x = torch.randn(2048, 2048, device="cuda")`)' in live
    # The next kernel's first cell shows the death, and the verdict.
    shown = outputs[5]["text"]
    assert "gpuleak: the previous kernel of this notebook died." in shown and "diagnosis: leak:" in shown, shown
    (dead,) = glob.glob(os.path.join(environment["XDG_STATE_HOME"], "gpuleak", "kernels", "*", "gpuleak-*", "kernel-death.txt"))
    with open(os.path.join(os.path.dirname(dead), "report.json")) as report:
        (process,) = json.load(report)["processes"]
    assert process["diagnosis"]["kind"] == "leak"
    assert process["growth"][0]["kind"] == "block"
    (failure,) = process["failures"]
    record = process["retainers"][failure["retainers"]]
    kept = record["holders"][0]
    assert kept["root"] == "`kept`, a list with 50 items in __main__"
    assert kept["bytes"] >= 49 * 16 * MiB and "view" in kept["through"]
    assert any("`x[...].clone()`" in advice for advice in kept["advice"])
    diagnosis = " ".join(process["diagnosis"]["text"].split())
    assert "of it held by `kept`, a list with 50 items in __main__." in diagnosis, diagnosis
