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
