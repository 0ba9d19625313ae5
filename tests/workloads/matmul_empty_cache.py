import gc

import torch
from memory_counters import print_memory_counters

device = "cuda"

for step in range(8):
    a = torch.randn(2000, 2000).to(device)
    b = torch.randn(2000, 2000).to(device)
    c = torch.matmul(a, b)
    print(f"step {step}: product of shape {tuple(c.shape)}")
    del a, b, c
    gc.collect()
    torch.cuda.empty_cache()

print_memory_counters()
