import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset
from memory_counters import print_memory_counters

torch.manual_seed(0)
device = "cuda"

features = torch.randn(4096, 784)
labels = torch.randint(0, 10, (4096,))
loader = DataLoader(TensorDataset(features, labels), batch_size=128, shuffle=True, num_workers=2, pin_memory=True)

model = nn.Sequential(
    nn.Linear(784, 1024),
    nn.ReLU(),
    nn.Linear(1024, 10),
).to(device)
optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
loss_fn = nn.CrossEntropyLoss()

seen = []
for epoch in range(2):
    model.train()
    for step, (inputs, targets) in enumerate(loader):
        x, y = inputs.to(device, non_blocking=True), targets.to(device, non_blocking=True)
        loss = loss_fn(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        seen.append((epoch, step, inputs.shape[0]))
    print(f"epoch {epoch + 1}: {len(seen)} batches so far")

print_memory_counters()
