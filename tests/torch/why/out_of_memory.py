# Evaluation without torch.no_grad() that keeps every batch's outputs, and with them each batch's autograd
# graph and the activations it saved, until the device runs out of memory. With --killed the process is
# then killed before it can write anything, as the kernel's OOM killer or a job scheduler would. With
# --hooks the forward passes run under saved-tensor hooks (as torch.utils.checkpoint's and save_on_cpu's
# do) that count how often a saved tensor is unpacked, which the script prints once the error is caught.
import contextlib
import os
import signal
import sys

import torch
from torch import nn

unpacked = 0


def unpack(tensor):
    global unpacked
    unpacked += 1
    return tensor


hooks = torch.autograd.graph.saved_tensors_hooks(lambda tensor: tensor, unpack)
torch.manual_seed(0)
model = nn.Sequential(nn.Linear(256, 1024), nn.ReLU(), nn.Linear(1024, 10)).cuda()
outputs = []
try:
    with hooks if "--hooks" in sys.argv else contextlib.nullcontext():
        for step in range(100000):
            x = torch.randn(512, 256, device="cuda")
            outputs.append(model(x))
except torch.OutOfMemoryError:
    if "--killed" in sys.argv:
        os.kill(os.getpid(), signal.SIGKILL)
    if "--hooks" not in sys.argv:
        raise
    print("unpacked %d saved tensors" % unpacked)
