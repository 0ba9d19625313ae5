# list_dataset.py's workers, one of which is killed with SIGKILL halfway through the epoch, as the
# kernel's OOM killer kills the process that holds the most memory when the machine runs out.
import os
import signal

import torch
from torch.utils.data import DataLoader, Dataset, get_worker_info

device = torch.device("cuda")


class Samples(Dataset):
    def __init__(self, count):
        self.samples = [(float(i % 1000), i % 10) for i in range(count)]

    def __len__(self):
        return len(self.samples)

    def __getitem__(self, index):
        if get_worker_info().id == 1 and index >= len(self.samples) // 2:
            os.kill(os.getpid(), signal.SIGKILL)
        return self.samples[index]


loader = DataLoader(Samples(1_500_000), batch_size=2000, num_workers=2)
model = torch.nn.Linear(1, 10).to(device)
for features, labels in loader:
    model(features.float().unsqueeze(1).to(device))
