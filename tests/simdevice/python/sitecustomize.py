"""Part of the simulated CUDA device's test bed (tests/simdevice), found through PYTHONPATH: PyTorch
runs its own convolution, batch-norm, recurrent and attention kernels instead of cuDNN's, as after
`torch.backends.cudnn.enabled = False` and `torch.backends.cuda.enable_cudnn_sdp(False)`, because cuDNN
cannot run on the simulated device (README, "What stays unsupported"). The user's script is unchanged;
nothing else is, and a sitecustomize further on the path still runs."""

import importlib.abc
import importlib.machinery
import importlib.util
import os
import sys


class _CudnnOffOnceTorchIsImported(importlib.abc.MetaPathFinder):
    """Hands out torch's own spec with a loader that switches cuDNN off once torch has run. It stays on
    the path until then: libraries look torch up (importlib.util.find_spec) long before they import it."""

    def __init__(self):
        self._finding = False

    def find_spec(self, name, path, target=None):
        if name != "torch" or self._finding:
            return None
        self._finding = True
        try:
            spec = importlib.util.find_spec(name)
        finally:
            self._finding = False
        if spec is None or spec.loader is None:
            return spec
        execute = spec.loader.exec_module

        def execute_then_switch_cudnn_off(module):
            execute(module)
            if self in sys.meta_path:
                sys.meta_path.remove(self)
            importlib.import_module("torch.backends.cudnn").enabled = False
            # scaled_dot_product_attention picks its backend by its own switches.
            importlib.import_module("torch.backends.cuda").enable_cudnn_sdp(False)

        spec.loader.exec_module = execute_then_switch_cudnn_off
        return spec


def _run_the_next_sitecustomize():
    here = os.path.dirname(os.path.abspath(__file__))
    rest = [entry for entry in sys.path if os.path.abspath(entry or os.curdir) != here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", rest)
    if spec is not None and spec.loader is not None:
        spec.loader.exec_module(importlib.util.module_from_spec(spec))


sys.meta_path.insert(0, _CudnnOffOnceTorchIsImported())
_run_the_next_sitecustomize()
