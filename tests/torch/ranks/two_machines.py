# One rank of a data-parallel job on two machines, started by torchrun: a process group of the gloo
# backend (the test bed's devices have no collective backend) sums each step's loss over the ranks.
# Its argument says which job it is: "leak" (rank 1 keeps each step's loss tensor), "early" (each rank
# makes a tensor on the GPU before torch.cuda.set_device(local_rank), so on device 0) or "clean".
import os
import sys

import torch
import torch.distributed as dist

mode = sys.argv[1]
local_rank = int(os.environ["LOCAL_RANK"])
if mode == "early":
    warmup = torch.zeros(1024, device="cuda")
torch.cuda.set_device(local_rank)
dist.init_process_group("gloo")
rank = dist.get_rank()
device = torch.device("cuda", local_rank)
torch.manual_seed(rank)
model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 10)).to(device)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
losses = []
for step in range(40):
    x, y = torch.randn(64, 64, device=device), torch.randint(0, 10, (64,), device=device)
    loss = torch.nn.functional.cross_entropy(model(x), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    if mode == "leak" and rank == 1:
        losses.append(loss)
    total = torch.tensor([loss.item()])
    dist.all_reduce(total)
print(f"rank {rank} summed loss {total.item():.2f}")
dist.destroy_process_group()
