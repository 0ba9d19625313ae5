import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset
from memory_counters import print_memory_counters

torch.manual_seed(0)
device = "cuda"

train_set = TensorDataset(torch.randn(2048, 784), torch.randint(0, 10, (2048,)))
val_set = TensorDataset(torch.randn(1024, 784), torch.randint(0, 10, (1024,)))
train_loader = DataLoader(train_set, batch_size=128, shuffle=True)
val_loader = DataLoader(val_set, batch_size=128)

model = nn.Sequential(
    nn.Linear(784, 2048),
    nn.ReLU(),
    nn.Linear(2048, 2048),
    nn.ReLU(),
    nn.Linear(2048, 10),
).to(device)
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
loss_fn = nn.CrossEntropyLoss()


@torch.no_grad()
def evaluate(model, loader):
    model.eval()
    outputs = []
    for x, _ in loader:
        outputs.append(model(x.to(device)))
    return torch.cat(outputs)


for epoch in range(3):
    model.train()
    for x, y in train_loader:
        x, y = x.to(device), y.to(device)
        loss = loss_fn(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    predictions = evaluate(model, val_loader)
    print(f"epoch {epoch + 1}: {predictions.shape[0]} validation predictions")

print_memory_counters()
