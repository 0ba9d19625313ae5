import torch
from transformers import GPT2Config, GPT2LMHeadModel
from memory_counters import print_memory_counters

torch.manual_seed(0)
device = "cuda"

config = GPT2Config(vocab_size=2048, n_positions=128, n_embd=256, n_layer=4, n_head=4)
model = GPT2LMHeadModel(config).to(device)
optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4)

history = []
model.train()
for step in range(40):
    input_ids = torch.randint(0, config.vocab_size, (8, 128), device=device)
    outputs = model(input_ids=input_ids, labels=input_ids)
    outputs.loss.backward()
    optimizer.step()
    optimizer.zero_grad()
    history.append(outputs)
    if (step + 1) % 10 == 0:
        print(f"step {step + 1}: {len(history)} losses kept")

print_memory_counters()
