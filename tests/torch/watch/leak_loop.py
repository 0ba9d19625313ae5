"""A training loop that keeps each step's loss, with its graph, until it is stopped: what gpuleak watch
must show growing while it runs."""

import time

import torch

model = torch.nn.Linear(512, 512).cuda()
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
losses = []
while True:
    batch = torch.randn(256, 512, device="cuda")
    loss = model(batch).pow(2).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    losses.append(loss)
    time.sleep(0.01)
