import lightning as L
import torch
from torch import nn
from torch.nn import functional as F
from torch.utils.data import DataLoader, TensorDataset
from memory_counters import print_memory_counters


class Classifier(L.LightningModule):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(), nn.Linear(512, 10))
        self.step_losses = []

    def training_step(self, batch, batch_idx):
        x, y = batch
        loss = F.cross_entropy(self.net(x), y)
        self.step_losses.append(loss)
        return loss

    def configure_optimizers(self):
        return torch.optim.Adam(self.parameters(), lr=1e-3)


torch.manual_seed(0)
features = torch.randn(4096, 784)
labels = torch.randint(0, 10, (4096,))
loader = DataLoader(TensorDataset(features, labels), batch_size=128, shuffle=True)

trainer = L.Trainer(
    max_epochs=3,
    accelerator="gpu",
    devices=1,
    logger=False,
    enable_checkpointing=False,
    enable_progress_bar=False,
    enable_model_summary=False,
)
trainer.fit(Classifier(), loader)
print(f"trained for {trainer.current_epoch} epochs")

print_memory_counters()
