"""Where the PyTorch environment of scripts/setup-torch.sh (and the JAX and TensorFlow ones of
scripts/setup-jax.sh and setup-tensorflow.sh) is, for the tests and the scenario runner, how a program
runs on the simulated device, and how the framework tests run one, alone or under gpuleak run."""

import glob
import json
import os
import subprocess
import textwrap


def _pinned_python(label):
    """The interpreter of scripts/setup-<label>.sh's environment: GPULEAK_<LABEL>_DIR, else a complete one
    in the default cache; None when there is none (an interrupted install has no completion stamp)."""
    root = os.environ.get(f"GPULEAK_{label.upper()}_DIR")
    candidates = [root] if root else sorted(glob.glob(os.path.expanduser(f"~/.cache/gpuleak/{label}-*-py3.*")))
    for candidate in candidates:
        python = os.path.join(candidate, "bin", "python")
        if os.path.exists(os.path.join(candidate, f".gpuleak-{label}-complete")) and os.path.exists(python):
            return python
    return None


def torch_python():
    return _pinned_python("torch")


def jax_python():
    return _pinned_python("jax")


def tensorflow_python():
    return _pinned_python("tensorflow")


def simulated_device_environment(simdevice_dir, cuda_lib_dir, capacity):
    """The variables that run a PyTorch, JAX or TensorFlow program on the simulated device of
    `simdevice_dir`: its libraries found before the CUDA toolkit's (which serve the rest of the
    framework's CUDA libraries),
    its Python half (which keeps PyTorch off cuDNN and lets JAX see the simulated GPU), a device of
    `capacity` bytes, and no announcement on stderr."""
    # Absolute: the program may run in another directory.
    simdevice_dir, cuda_lib_dir = os.path.abspath(simdevice_dir), os.path.abspath(cuda_lib_dir)
    python_path = [os.path.join(simdevice_dir, "python")]
    if os.environ.get("PYTHONPATH"):
        python_path.append(os.environ["PYTHONPATH"])
    return {
        "LD_LIBRARY_PATH": os.pathsep.join([simdevice_dir, cuda_lib_dir]),
        "PYTHONPATH": os.pathsep.join(python_path),
        "GPULEAK_SIM_CAPACITY": str(capacity),
        "GPULEAK_SIM_QUIET": "1",
    }


def run_json_program(python, program, environment):
    """Runs the Python source `program` with the interpreter `python`; it prints one JSON line last and
    must end normally. Returns that line, read, and the program's stderr."""
    completed = subprocess.run(
        [python, "-c", textwrap.dedent(program)], env=environment, capture_output=True, text=True, timeout=300
    )
    assert completed.returncode == 0, completed.stderr[-4000:]
    return json.loads(completed.stdout.strip().splitlines()[-1]), completed.stderr


def run_under_gpuleak(launcher, python, script, directory, environment, status=0):
    """Runs `script` with the interpreter `python` as a user would under gpuleak run, writing into
    `directory`; it must end with `status`. Returns the report's processes, its text and the finished run."""
    completed = subprocess.run(
        [launcher, "run", "--quiet", "-o", str(directory), "--", python, script],
        env=environment,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert completed.returncode == status, completed.stderr[-4000:]
    with open(os.path.join(directory, "report.json")) as report:
        processes = json.load(report)["processes"]
    with open(os.path.join(directory, "report.txt")) as text:
        return processes, text.read(), completed
