# A dataset that normalises each sample with a tensor it keeps on the GPU: every DataLoader worker
# (spawned, as CUDA needs) makes a CUDA context of its own on device 0 and holds memory there, beside the
# training process's.
import torch
from torch.utils.data import DataLoader, Dataset

device = torch.device("cuda")


class Normalised(Dataset):
    def __init__(self, count):
        self.count = count
        self.scale = None

    def __len__(self):
        return self.count

    def __getitem__(self, index):
        if self.scale is None:
            self.scale = torch.full((256, 1024), 0.5, device=device)
        return torch.arange(16, dtype=torch.float32) * self.scale[0, 0].item(), index % 10


if __name__ == "__main__":
    loader = DataLoader(Normalised(256), batch_size=32, num_workers=2, multiprocessing_context="spawn")
    model = torch.nn.Linear(16, 10).to(device)
    total = 0.0
    for features, labels in loader:
        total += torch.nn.functional.cross_entropy(model(features.to(device)), labels.to(device)).item()
    print(f"mean loss {total / len(loader):.3f}")
