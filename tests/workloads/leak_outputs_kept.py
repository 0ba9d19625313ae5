import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset
from memory_counters import print_memory_counters

torch.manual_seed(0)
device = "cuda"


class SmallCNN(nn.Module):
    def __init__(self, classes=10):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 32, kernel_size=3, padding=1),
            nn.BatchNorm2d(32),
            nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Conv2d(32, 64, kernel_size=3, padding=1),
            nn.BatchNorm2d(64),
            nn.ReLU(),
            nn.MaxPool2d(2),
        )
        self.classifier = nn.Sequential(
            nn.Flatten(),
            nn.Dropout(0.25),
            nn.Linear(64 * 8 * 8, 256),
            nn.ReLU(),
            nn.Linear(256, classes),
        )

    def forward(self, x):
        features = self.features(x)
        return features, self.classifier(features)


images = torch.randn(1024, 3, 32, 32)
labels = torch.randint(0, 10, (1024,))
loader = DataLoader(TensorDataset(images, labels), batch_size=64, shuffle=True)

model = SmallCNN().to(device)
optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
criterion = nn.CrossEntropyLoss()

feature_maps = []
for epoch in range(3):
    model.train()
    for images_batch, labels_batch in loader:
        images_batch, labels_batch = images_batch.to(device), labels_batch.to(device)
        features, logits = model(images_batch)
        loss = criterion(logits, labels_batch)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        feature_maps.append(features)
    print(f"epoch {epoch + 1}: {len(feature_maps)} feature maps of shape {tuple(feature_maps[-1].shape)} kept")

print_memory_counters()
