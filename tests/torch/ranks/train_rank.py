# One rank of a data-parallel job started by torchrun: each trains its own copy of a small model on its
# own shard, without a process group (the test bed has no collective backend for the device).
import os

import torch

rank = int(os.environ["RANK"])
world_size = int(os.environ["WORLD_SIZE"])
device = torch.device("cuda")
torch.manual_seed(rank)

model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 10)).to(device)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
inputs = torch.randn(1024, 64)
labels = torch.randint(0, 10, (1024,))
shard = range(rank, len(inputs), world_size)

for epoch in range(3):
    total = 0.0
    for start in range(0, len(shard), 64):
        batch = list(shard[start : start + 64])
        x, y = inputs[batch].to(device), labels[batch].to(device)
        loss = torch.nn.functional.cross_entropy(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        total += loss.item()
    print(f"rank {rank} epoch {epoch} loss {total:.2f}")
