"""Part of the simulated CUDA device's test bed (simdevice), found through PYTHONPATH. The user's
script is unchanged; only these three things are, and a sitecustomize further on the path still runs:

- PyTorch runs its own convolution, batch-norm, recurrent and attention kernels instead of cuDNN's, as
  after `torch.backends.cudnn.enabled = False` and `torch.backends.cuda.enable_cudnn_sdp(False)`,
  because cuDNN cannot run on the simulated device (docs/simulated-device.md, "What stays unsupported").
- JAX sees the simulated GPU: it starts its CUDA backend only where a /dev/nvidia* device file exists
  (jax._src.hardware_utils.has_visible_nvidia_gpu), which a machine without a GPU has none of, and which
  the test bed cannot make without root. Nothing else of JAX's is changed; its CUDA plugin then finds
  the simulated libraries through LD_LIBRARY_PATH, as it finds the toolkit's where its own NVIDIA wheels
  are not installed.
- XLA (JAX's, and TensorFlow's for Keras' compiled steps) runs its kernels one by one, never as CUDA
  graphs (its command buffers, which it may choose for a jitted function and which the simulated device
  cannot create), as after `XLA_FLAGS=--xla_gpu_enable_command_buffer=`, and picks its kernels' tile
  sizes by its own rules instead of timing candidates, as after `--xla_gpu_autotune_level=0`: its
  autotuner times kernels that compute nothing here, and checks their outputs against each other on
  the host, which made a Keras step of wide layers ten times as slow. Each unless XLA_FLAGS already
  names it."""

import importlib.abc
import importlib.machinery
import importlib.util
import os
import sys


class _AfterImport(importlib.abc.MetaPathFinder):
    """Hands out module `name`'s own spec with a loader that calls `then(module)` once the module has
    run. It stays on the path until then: libraries look modules up (importlib.util.find_spec) long
    before they import them."""

    def __init__(self, name, then):
        self._name = name
        self._then = then
        self._finding = False

    def find_spec(self, name, path, target=None):
        if name != self._name or self._finding:
            return None
        self._finding = True
        try:
            spec = importlib.util.find_spec(name)
        finally:
            self._finding = False
        if spec is None or spec.loader is None:
            return spec
        execute = spec.loader.exec_module

        def execute_then(module):
            execute(module)
            if self in sys.meta_path:
                sys.meta_path.remove(self)
            self._then(module)

        spec.loader.exec_module = execute_then
        return spec


def _switch_cudnn_off(_torch):
    importlib.import_module("torch.backends.cudnn").enabled = False
    # scaled_dot_product_attention picks its backend by its own switches.
    importlib.import_module("torch.backends.cuda").enable_cudnn_sdp(False)


def _see_the_simulated_gpu(hardware_utils):
    hardware_utils.has_visible_nvidia_gpu = lambda: True


def _run_the_next_sitecustomize():
    here = os.path.dirname(os.path.abspath(__file__))
    rest = [entry for entry in sys.path if os.path.abspath(entry or os.curdir) != here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", rest)
    if spec is not None and spec.loader is not None:
        spec.loader.exec_module(importlib.util.module_from_spec(spec))


def _without_command_buffers_or_autotuning():
    flags = os.environ.get("XLA_FLAGS", "")
    added = [
        flag
        for flag in ("--xla_gpu_enable_command_buffer=", "--xla_gpu_autotune_level=0")
        if flag.split("=")[0] not in flags
    ]
    if added:
        os.environ["XLA_FLAGS"] = " ".join(added + [flags]).strip()


_without_command_buffers_or_autotuning()
sys.meta_path.insert(0, _AfterImport("torch", _switch_cudnn_off))
sys.meta_path.insert(0, _AfterImport("jax._src.hardware_utils", _see_the_simulated_gpu))
_run_the_next_sitecustomize()
