import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset
from memory_counters import print_memory_counters

torch.manual_seed(0)
device = "cuda"
accumulation_steps = 4

inputs = torch.randn(4096, 256)
labels = torch.randint(0, 20, (4096,))
loader = DataLoader(TensorDataset(inputs, labels), batch_size=64, shuffle=True)

model = nn.Sequential(nn.Linear(256, 1024), nn.ReLU(), nn.Dropout(0.1), nn.Linear(1024, 20)).to(device)
optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
loss_fn = nn.CrossEntropyLoss()

for epoch in range(2):
    running_loss = 0.0
    optimizer.zero_grad()
    for i, (x, y) in enumerate(loader):
        x, y = x.to(device), y.to(device)
        loss = loss_fn(model(x), y) / accumulation_steps
        loss.backward()
        running_loss += loss.item()
        if (i + 1) % accumulation_steps == 0:
            optimizer.step()
            optimizer.zero_grad()
    print(f"epoch {epoch + 1}: {len(loader) // accumulation_steps} optimizer steps")

print_memory_counters()
