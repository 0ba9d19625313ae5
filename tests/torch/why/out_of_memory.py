# Evaluation without torch.no_grad() that keeps every batch's outputs, and with them each batch's autograd
# graph and the activations it saved, until the device runs out of memory. With --killed the process is
# then killed before it can write anything, as the kernel's OOM killer or a job scheduler would.
import os
import signal
import sys

import torch
from torch import nn

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(256, 1024), nn.ReLU(), nn.Linear(1024, 10)).cuda()
outputs = []
try:
    for step in range(100000):
        x = torch.randn(512, 256, device="cuda")
        outputs.append(model(x))
except torch.OutOfMemoryError:
    if "--killed" in sys.argv:
        os.kill(os.getpid(), signal.SIGKILL)
    raise
