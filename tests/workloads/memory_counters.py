"""PyTorch's counters of the device memory: every script of the corpus prints them as its last line, and
tests/torch/test_workloads.py compares them with the report's peak and final bytes."""

import torch


def print_memory_counters():
    print(
        f"memory_allocated={torch.cuda.memory_allocated()} memory_reserved={torch.cuda.memory_reserved()} "
        f"max_memory_allocated={torch.cuda.max_memory_allocated()} max_memory_reserved={torch.cuda.max_memory_reserved()}"
    )
