# DataLoader workers started with the spawn method: each is a new interpreter that unpickles its own
# copy of the dataset, once, and shares nothing with the main process.
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


if __name__ == "__main__":
    loader = DataLoader(Samples(200_000), batch_size=2000, num_workers=2, multiprocessing_context="spawn")
    model = torch.nn.Linear(1, 10).to(device)
    total = 0.0
    for features, labels in loader:
        total += torch.nn.functional.cross_entropy(model(features.float().unsqueeze(1).to(device)), labels.to(device)).item()
    print(f"mean loss {total / len(loader):.3f}")
