# A dataset held as a Python list of tuples, read by two DataLoader workers: each worker's reads write
# the reference counts of the tuples, so the pages it shares with the main process become its own.
import torch
from torch.utils.data import DataLoader, Dataset

device = torch.device("cuda")


class Samples(Dataset):
    def __init__(self, count):
        self.samples = [(float(i % 1000), i % 10) for i in range(count)]

    def __len__(self):
        return len(self.samples)

    def __getitem__(self, index):
        return self.samples[index]


loader = DataLoader(Samples(1_500_000), batch_size=2000, num_workers=2)
model = torch.nn.Linear(1, 10).to(device)
total = 0.0
for features, labels in loader:
    logits = model(features.float().unsqueeze(1).to(device))
    total += torch.nn.functional.cross_entropy(logits, labels.to(device)).item()
print(f"mean loss {total / len(loader):.3f}")
