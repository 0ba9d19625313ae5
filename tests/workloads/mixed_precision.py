import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset
from memory_counters import print_memory_counters

torch.manual_seed(0)
device = "cuda"

features = torch.randn(2048, 512)
targets = torch.randn(2048, 1)
loader = DataLoader(TensorDataset(features, targets), batch_size=256, shuffle=True)

model = nn.Sequential(
    nn.Linear(512, 2048),
    nn.GELU(),
    nn.LayerNorm(2048),
    nn.Linear(2048, 2048),
    nn.GELU(),
    nn.Linear(2048, 1),
).to(device)
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.01)
scaler = torch.amp.GradScaler("cuda")

for epoch in range(3):
    for x, y in loader:
        x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
        optimizer.zero_grad(set_to_none=True)
        with torch.autocast(device_type="cuda", dtype=torch.float16):
            prediction = model(x)
            loss = nn.functional.mse_loss(prediction, y)
        scaler.scale(loss).backward()
        scaler.unscale_(optimizer)
        torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=1.0)
        scaler.step(optimizer)
        scaler.update()
    print(f"epoch {epoch + 1} done")

print_memory_counters()
