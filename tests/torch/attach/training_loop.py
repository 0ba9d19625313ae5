"""A PyTorch training loop started without gpuleak, that gpuleak attach records while it runs. With --keep
it keeps each step's loss, with its graph, as a leak does. It runs until the file named by its first
argument exists, prints only "started" (after its first step) and "stopped", and exits with status 3."""

import os
import sys
import time

import torch

stop = sys.argv[1]
keep = "--keep" in sys.argv
model = torch.nn.Linear(512, 512).cuda()
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
losses = []
started = False
while not os.path.exists(stop):
    batch = torch.randn(256, 512, device="cuda")
    loss = model(batch).pow(2).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    if keep:
        losses.append(loss)
    if not started:
        print("started", flush=True)
        started = True
    time.sleep(0.01)
print("stopped", flush=True)
sys.exit(3)
