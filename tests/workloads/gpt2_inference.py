import torch
from transformers import GPT2Config, GPT2LMHeadModel
from memory_counters import print_memory_counters

torch.manual_seed(0)
device = "cuda"

config = GPT2Config(vocab_size=2048, n_positions=128, n_embd=256, n_layer=4, n_head=4)
model = GPT2LMHeadModel(config).to(device).eval()

batches = [torch.randint(0, config.vocab_size, (8, 128)) for _ in range(3)]
with torch.no_grad():
    for number, input_ids in enumerate(batches):
        logits = model(input_ids=input_ids.to(device)).logits
        next_tokens = logits[:, -1].argmax(dim=-1)
        print(f"batch {number}: {next_tokens.shape[0]} next tokens")

print_memory_counters()
