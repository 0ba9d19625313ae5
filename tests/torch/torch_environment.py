"""Where the PyTorch environment of scripts/setup-torch.sh is, for the tests and the scenario runner."""

import glob
import os


def torch_python():
    """The environment's interpreter: GPULEAK_TORCH_DIR, else a complete one in the default cache; None
    when there is none (an interrupted install has no completion stamp)."""
    root = os.environ.get("GPULEAK_TORCH_DIR")
    candidates = [root] if root else sorted(glob.glob(os.path.expanduser("~/.cache/gpuleak/torch-*-py3.*")))
    for candidate in candidates:
        python = os.path.join(candidate, "bin", "python")
        if os.path.exists(os.path.join(candidate, ".gpuleak-torch-complete")) and os.path.exists(python):
            return python
    return None


def simulated_device_environment(simdevice_dir, cuda_lib_dir, capacity):
    """The variables that run a PyTorch program on the simulated device of `simdevice_dir`: its libraries
    found before the CUDA toolkit's (which serve the rest of torch's CUDA libraries), its Python half
    that keeps PyTorch off cuDNN, a device of `capacity` bytes, and no announcement on stderr."""
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
