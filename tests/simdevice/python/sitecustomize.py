"""Part of the simulated CUDA device's test bed (tests/simdevice), found through PYTHONPATH: PyTorch
runs its own convolution, batch-norm, recurrent and attention kernels instead of cuDNN's, as after
`torch.backends.cudnn.enabled = False` and `torch.backends.cuda.enable_cudnn_sdp(False)`, because cuDNN
cannot run on the simulated device (README, "What stays unsupported"). The user's script is unchanged;
nothing else is."""

import importlib
import importlib.abc
import importlib.util
import sys


class _CudnnOffOnceTorchIsImported(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name != "torch":
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(name)
        if spec is None or spec.loader is None:
            return spec
        execute = spec.loader.exec_module

        def execute_then_switch_cudnn_off(module):
            execute(module)
            importlib.import_module("torch.backends.cudnn").enabled = False
            # scaled_dot_product_attention picks its backend by its own switches.
            importlib.import_module("torch.backends.cuda").enable_cudnn_sdp(False)

        spec.loader.exec_module = execute_then_switch_cudnn_off
        return spec


sys.meta_path.insert(0, _CudnnOffOnceTorchIsImported())
