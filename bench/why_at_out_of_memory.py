"""How long an out-of-memory error of PyTorch waits for gpuleak to record what held the memory: the
evaluation of tests/torch/why/out_of_memory.py (outputs kept with their graphs until a device of 256 MiB is
full) under `gpuleak run` on the simulated device, with the PyTorch environment of scripts/setup-torch.sh.
The wait is the record's time less the error's in the report (gpuleak-report on the trace, then the
search); the search's own share is the record's `seconds`.

usage: python bench/why_at_out_of_memory.py BUILD_DIR [RUNS]   (default 3 runs)
Prints one line per run: the wait, the search, the objects searched, the trace's size.
"""

import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "torch"))

from torch_environment import simulated_device_environment, torch_python  # noqa: E402

SCRIPT = os.path.join(HERE, "..", "tests", "torch", "why", "out_of_memory.py")


def run(build, directory):
    environment = dict(os.environ, GPULEAK_TORCH_ADAPTER_DIR=os.path.join(build, "torch-adapter-cache"))
    environment.update(
        simulated_device_environment(
            os.path.join(build, "simdevice"), os.environ.get("GPULEAK_CUDA_LIB_DIR", "/usr/local/cuda/lib64"), 256 << 20
        )
    )
    launcher = os.path.join(build, "launcher", "gpuleak")
    subprocess.run(
        [launcher, "run", "--quiet", "-o", directory, "--", torch_python(), SCRIPT],
        env=environment, capture_output=True, check=False, timeout=600,
    )
    with open(os.path.join(directory, "report.json")) as report:
        (process,) = json.load(report)["processes"]
    (failure,) = [failure for failure in process["failures"] if failure["out_of_memory"]]
    record = process["retainers"][failure["retainers"]]
    return record["t_s"] - failure["t_s"], record["seconds"], record["objects_searched"], os.path.getsize(process["trace"])


if __name__ == "__main__":
    build = os.path.abspath(sys.argv[1])
    for number in range(int(sys.argv[2]) if len(sys.argv) > 2 else 3):
        with tempfile.TemporaryDirectory() as directory:
            wait, search, objects, size = run(build, os.path.join(directory, "run"))
        print("run %d: waited %.2f s, of which the search %.2f s (%d objects); trace %.0f MiB" % (
            number + 1, wait, search, objects, size / (1 << 20)))
