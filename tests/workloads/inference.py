import torch
from torch import nn
from memory_counters import print_memory_counters

torch.manual_seed(0)
device = "cuda"

model = nn.Sequential(
    nn.Linear(784, 1024),
    nn.ReLU(),
    nn.Linear(1024, 1024),
    nn.ReLU(),
    nn.Linear(1024, 10),
)
model = model.to(device).eval()

batches = [torch.randn(256, 784) for _ in range(3)]
with torch.no_grad():
    for number, batch in enumerate(batches):
        scores = model(batch.to(device))
        predictions = scores.argmax(dim=1)
        print(f"batch {number}: {predictions.shape[0]} predictions")

print_memory_counters()
