import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset
from memory_counters import print_memory_counters

torch.manual_seed(0)
device = "cuda"

features = torch.randn(4096, 784)
labels = torch.randint(0, 10, (4096,))
loader = DataLoader(TensorDataset(features, labels), batch_size=128, shuffle=True)

model = nn.Sequential(
    nn.Linear(784, 1024),
    nn.ReLU(),
    nn.Linear(1024, 1024),
    nn.ReLU(),
    nn.Linear(1024, 10),
).to(device)
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
loss_fn = nn.CrossEntropyLoss()

losses = []
for epoch in range(3):
    model.train()
    for x, y in loader:
        x, y = x.to(device), y.to(device)
        loss = loss_fn(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss)
    print(f"epoch {epoch + 1}: {len(losses)} steps so far")

print_memory_counters()
