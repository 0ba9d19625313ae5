# list_dataset.py over two epochs with persistent workers: the same two workers serve both epochs.
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


loader = DataLoader(Samples(1_500_000), batch_size=2000, num_workers=2, persistent_workers=True)
model = torch.nn.Linear(1, 10).to(device)
for epoch in range(2):
    total = 0.0
    for features, labels in loader:
        total += torch.nn.functional.cross_entropy(model(features.float().unsqueeze(1).to(device)), labels.to(device)).item()
    print(f"epoch {epoch}: mean loss {total / len(loader):.3f}")
