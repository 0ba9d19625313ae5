# The list dataset of list_dataset.py, whose workers copy the pages they read, with a training loop that
# keeps every batch's loss on the device, graph and all: a GPU leak in the main process beside the
# workers' copy-on-write.
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
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
losses = []
for features, labels in loader:
    logits = model(features.float().unsqueeze(1).to(device))
    loss = torch.nn.functional.cross_entropy(logits, labels.to(device))
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    losses.append(loss)
print(f"{len(losses)} losses kept")
