"""gpuleak attach on a PyTorch training loop started without gpuleak, on the simulated device: the leak
found at the line that made what the loop keeps, what PyTorch's allocator held before the attach listed
as such, and the loop's output and status its own.

Environment: that of test_workloads.py.
"""

import json
import os
import subprocess

from test_workloads import LAUNCHER, script_command
from test_workloads import pytestmark as workload_marks
from test_torch_adapter import adapter_cache  # noqa: F401 (a fixture)

pytestmark = workload_marks

LOOP = os.path.join(os.path.dirname(os.path.abspath(__file__)), "attach", "training_loop.py")
TIMEOUT = 300


def attached_run(tmp_path, adapter_cache, *arguments):
    """Starts the loop plainly, records it for 3 s with gpuleak attach, then stops it: the attach's
    result, the report's process, and the loop's status, stdout and stderr."""
    stop = tmp_path / "stop"
    command, environment = script_command(tmp_path, LOOP, adapter_cache, traced=False,
                                          arguments=(str(stop), *arguments))
    # Where `gpuleak torch-adapter` built the adapter for this torch.
    environment["GPULEAK_TORCH_ADAPTER_DIR"] = adapter_cache
    loop = subprocess.Popen(command, env=environment, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert loop.stdout.readline() == "started\n", loop.stderr.read()
        attached = subprocess.run([LAUNCHER, "attach", str(loop.pid), "--duration", "3", "-o", str(tmp_path / "run")],
                                  env=environment, capture_output=True, text=True, timeout=TIMEOUT)
    finally:
        stop.touch()
        out, err = loop.communicate(timeout=TIMEOUT)
    assert attached.returncode == 0, attached.stderr
    with open(tmp_path / "run" / "report.json") as report:
        (process,) = json.load(report)["processes"]
    return attached, process, (loop.returncode, "started\n" + out, err)


def program_texts(site):
    return [frame.get("source_line") for frame in site["frames"] if frame.get("program")]


def test_a_leaking_pytorch_loop_attached_to(tmp_path, adapter_cache):
    attached, process, ended = attached_run(tmp_path, adapter_cache, "--keep")
    assert ended == (3, "started\nstopped\n", ""), ended
    assert process["diagnosis"]["kind"] == "leak", process["diagnosis"]
    growing = [site for site in process["leaks"] if site["growing"]]
    assert growing and program_texts(growing[0])[0] == "loss = model(batch).pow(2).mean()", growing
    # What the allocator held as the recording began: the model, and the losses kept so far.
    (before,) = [site for site in process["leaks"] if site["before_attach"] and site["kind"] == "block"]
    assert before["bytes"] > 1 << 20 and before["frames"] == []
    assert process["summary"]["final_reserved_bytes"] >= process["summary"]["final_allocated_bytes"] > 0
    with open(tmp_path / "run" / "report.txt") as text:
        report = text.read()
    assert "before attach: held when gpuleak attach began recording" in report, report
    assert "diagnosis: leak: " in attached.stderr


def test_a_correct_pytorch_loop_attached_to_is_stable(tmp_path, adapter_cache):
    _, process, ended = attached_run(tmp_path, adapter_cache)
    assert ended == (3, "started\nstopped\n", ""), ended
    assert process["diagnosis"]["kind"] == "stable", process["diagnosis"]
