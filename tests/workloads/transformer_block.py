import torch
from torch import nn
from memory_counters import print_memory_counters

torch.manual_seed(0)
device = "cuda"
vocab_size, d_model, heads = 2000, 256, 8


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.attention = nn.MultiheadAttention(d_model, heads, batch_first=True)
        self.norm1 = nn.LayerNorm(d_model)
        self.feed_forward = nn.Sequential(nn.Linear(d_model, 4 * d_model), nn.GELU(), nn.Linear(4 * d_model, d_model))
        self.norm2 = nn.LayerNorm(d_model)

    def forward(self, x, mask):
        attended, _ = self.attention(x, x, x, attn_mask=mask, need_weights=False)
        x = self.norm1(x + attended)
        return self.norm2(x + self.feed_forward(x))


class TinyLanguageModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, d_model)
        self.blocks = nn.ModuleList([Block() for _ in range(2)])
        self.head = nn.Linear(d_model, vocab_size)

    def forward(self, tokens, mask):
        x = self.embedding(tokens)
        for block in self.blocks:
            x = block(x, mask)
        return self.head(x)


def causal_mask(length):
    return torch.triu(torch.full((length, length), float("-inf"), device=device), diagonal=1)


model = TinyLanguageModel().to(device)
optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4)
masks = {}

lengths = [32, 64, 48, 128, 96]
for step in range(40):
    length = lengths[step % len(lengths)]
    tokens = torch.randint(0, vocab_size, (16, length + 1), device=device)
    inputs, targets = tokens[:, :-1], tokens[:, 1:]
    mask = masks.setdefault(length, causal_mask(length))
    logits = model(inputs, mask)
    loss = nn.functional.cross_entropy(logits.reshape(-1, vocab_size), targets.reshape(-1))
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    if (step + 1) % 10 == 0:
        print(f"step {step + 1}: sequence length {length}")

print_memory_counters()
