# Inputs and targets from two DataLoaders read side by side: both iterators, and so their workers, start
# on the same line and live together for the epoch.
import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset

device = torch.device("cuda")


class Column(Dataset):
    def __init__(self, values):
        self.values = values

    def __len__(self):
        return len(self.values)

    def __getitem__(self, index):
        return self.values[index]


index = np.arange(400_000)
inputs = DataLoader(Column((index % 1000).astype(np.float32)), batch_size=2000, num_workers=2)
targets = DataLoader(Column((index % 10).astype(np.int64)), batch_size=2000, num_workers=2)
model = torch.nn.Linear(1, 10).to(device)
total = 0.0
for features, labels in zip(inputs, targets):
    logits = model(features.unsqueeze(1).to(device))
    total += torch.nn.functional.cross_entropy(logits, labels.to(device)).item()
print(f"mean loss {total / len(inputs):.3f}")
