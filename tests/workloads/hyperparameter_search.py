import gpuleak
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset
from memory_counters import print_memory_counters

torch.manual_seed(0)
device = "cuda"

data = TensorDataset(torch.randn(1024, 1024), torch.randint(0, 10, (1024,)))
loader = DataLoader(data, batch_size=128, shuffle=True)


def make_model(width):
    return nn.Sequential(
        nn.Linear(1024, width),
        nn.ReLU(),
        nn.Linear(width, width),
        nn.ReLU(),
        nn.Linear(width, 10),
    ).to(device)


def train(model, lr, epochs=2):
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    for _ in range(epochs):
        for x, y in loader:
            loss = nn.functional.cross_entropy(model(x.to(device)), y.to(device))
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
    return loss.item()


grid = [(lr, width) for lr in (1e-2, 3e-3, 1e-3, 3e-4, 1e-4, 3e-5) for width in (1024, 2048)]
results = []
for trial, (lr, width) in enumerate(grid):
    try:
        with gpuleak.phase(f"trial {trial}"):
            model = make_model(width)
            final_loss = train(model, lr)
            results.append({"lr": lr, "width": width, "loss": final_loss})
    except torch.OutOfMemoryError:
        print(f"trial {trial}: CUDA out of memory, search stopped")
        break
    print(f"trial {trial}: lr={lr} width={width}")
print(f"{len(results)} of {len(grid)} trials finished")

print_memory_counters()
