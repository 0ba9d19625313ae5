"""What the record at exit (GPULEAK_WHY=exit, the default) costs a program's end: scripts of the workload
corpus (tests/workloads/) under `gpuleak run` on the simulated device, with the PyTorch environment of
scripts/setup-torch.sh, timed from start to end with `GPULEAK_WHY=oom` and with the default. The
difference is the report of the trace and the search made as the program ends (and the record's share of
the report at the end); the search's own share is the record's `seconds`.

usage: python bench/why_at_exit.py BUILD_DIR [RUNS]   (default 3 runs of each script and setting)
Prints one line per script: the median time without and with the record, the search, the objects
searched.
"""

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "torch"))

from torch_environment import simulated_device_environment, torch_python  # noqa: E402

WORKLOADS = os.path.join(HERE, "..", "tests", "workloads")
SCRIPTS = ["mlp_adam.py", "cnn.py", "leak_evaluation_without_no_grad.py"]


def run(build, script, directory, why):
    environment = dict(os.environ, GPULEAK_TORCH_ADAPTER_DIR=os.path.join(build, "torch-adapter-cache"))
    environment.update(
        simulated_device_environment(
            os.path.join(build, "simdevice"), os.environ.get("GPULEAK_CUDA_LIB_DIR", "/usr/local/cuda/lib64"), 4 << 30
        )
    )
    environment["PYTHONPATH"] = os.pathsep.join([os.path.join(HERE, "..", "python"), environment["PYTHONPATH"]])
    environment["GPULEAK_WHY"] = why
    launcher = os.path.join(build, "launcher", "gpuleak")
    started = time.monotonic()
    subprocess.run(
        [launcher, "run", "--quiet", "-o", directory, "--", torch_python(),
         os.path.join(WORKLOADS, script)],
        env=environment, capture_output=True, check=True, timeout=600,
    )
    return time.monotonic() - started


def record_at_exit(directory):
    with open(os.path.join(directory, "report.json")) as report:
        (process,) = json.load(report)["processes"]
    (record,) = [record for record in process["retainers"] if record["moment"] == "exit"]
    return record


if __name__ == "__main__":
    build = os.path.abspath(sys.argv[1])
    runs = int(sys.argv[2]) if len(sys.argv) > 2 else 3
    for script in SCRIPTS:
        times = {"oom": [], "oom,exit": []}
        searches, objects = [], []
        for _ in range(runs):
            for why in times:
                with tempfile.TemporaryDirectory() as directory:
                    directory = os.path.join(directory, "run")
                    times[why].append(run(build, script, directory, why))
                    if why == "oom,exit":
                        record = record_at_exit(directory)
                        searches.append(record["seconds"])
                        objects.append(record["objects_searched"])
        print("%s: %.2f s without the record at exit, %.2f s with it (+%.2f s), of which the search %.2f s "
              "(%d objects)" % (
                  script, statistics.median(times["oom"]), statistics.median(times["oom,exit"]),
                  statistics.median(times["oom,exit"]) - statistics.median(times["oom"]),
                  statistics.median(searches), statistics.median(objects)))
