import gc

import torch

device = "cuda"

for step in range(8):
    a = torch.randn(2000, 2000).to(device)
    b = torch.randn(2000, 2000).to(device)
    c = torch.matmul(a, b)
    print(f"step {step}: product of shape {tuple(c.shape)}")
    del a, b, c
    gc.collect()
    torch.cuda.empty_cache()

print(
    f"memory_allocated={torch.cuda.memory_allocated()} memory_reserved={torch.cuda.memory_reserved()} "
    f"max_memory_allocated={torch.cuda.max_memory_allocated()} max_memory_reserved={torch.cuda.max_memory_reserved()}"
)
