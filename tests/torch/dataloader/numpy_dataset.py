# The same samples as list_dataset.py, held in numpy arrays: a worker's reads write nothing, so the pages
# it shares with the main process stay shared. Two epochs, each with its own two workers.
import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset

device = torch.device("cuda")


class Samples(Dataset):
    def __init__(self, count):
        index = np.arange(count)
        self.features = (index % 1000).astype(np.float32)
        self.labels = (index % 10).astype(np.int64)

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, index):
        return float(self.features[index]), int(self.labels[index])


loader = DataLoader(Samples(1_500_000), batch_size=2000, num_workers=2)
model = torch.nn.Linear(1, 10).to(device)
for epoch in range(2):
    total = 0.0
    for features, labels in loader:
        logits = model(features.float().unsqueeze(1).to(device))
        total += torch.nn.functional.cross_entropy(logits, labels.to(device)).item()
    print(f"epoch {epoch}: mean loss {total / len(loader):.3f}")
