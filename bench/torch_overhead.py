"""The program of bench/torch_overhead.sh: tensor allocation/free pairs of PyTorch's caching allocator
(torch.empty of varied small sizes, then del), made in a Python loop from three call depths, timed;
prints one line with the nanoseconds per pair.

Run plain, under LD_PRELOAD=libgpuleak.so with the PyTorch adapter, and with PyTorch's own recorder
(MODE history: torch.cuda.memory._record_memory_history(enabled="all", context="all", stacks="python")),
the differences per pair are what each recorder adds to a tensor's allocation and free.

Usage: torch_overhead.py MODE PAIRS WARMUP      MODE: plain, gpuleak (plain here; the preload does the
work) or history
"""
import sys
import time

import torch

# Small requests, not multiples of 512 and below 1 MiB: every block comes from the allocator's small
# pool, whose 2 MiB segments the warm-up has obtained, so the timed pairs reach CUDA never and
# measure the allocator and the recorder only.
SIZES = [700, 4096, 12345, 65536, 100000, 262144, 500000, 1000000]
# Python frames above the loop: a shallow script, a model's forward, a deep framework stack.
DEPTHS = [4, 12, 24]
# PyTorch keeps every history entry by default (max_entries=sys.maxsize, "several KB" each); bounded
# as its documentation's example does, as gpuleak's trace has a fixed size (a ring of 524,288 events).
HISTORY_ENTRIES = 100000


def run_pairs(pairs):
    device = torch.device("cuda")
    sizes = SIZES
    count = len(sizes)
    for i in range(pairs):
        tensor = torch.empty(sizes[i % count], dtype=torch.uint8, device=device)
        del tensor


def descend(frames_left, pairs):
    """Recurses until the stack holds the wanted Python frames, then runs the pairs from there."""
    if frames_left > 1:
        return descend(frames_left - 1, pairs)
    return run_pairs(pairs)


def run_at_depths(pairs):
    # main and the module level are frames too, and run_pairs is the last: descend makes up the rest.
    for depth in DEPTHS:
        descend(depth - 3, pairs // len(DEPTHS))


def main():
    mode, pairs, warmup = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    pairs -= pairs % len(DEPTHS)
    torch.cuda.init()
    if mode == "history":
        torch.cuda.memory._record_memory_history(
            enabled="all", context="all", stacks="python", max_entries=HISTORY_ENTRIES
        )
    run_at_depths(warmup)
    torch.cuda.synchronize()
    start = time.perf_counter_ns()
    cpu_start = time.thread_time_ns()
    run_at_depths(pairs)
    wall, cpu = time.perf_counter_ns() - start, time.thread_time_ns() - cpu_start
    # What was measured recorded something: PyTorch's history holds the timed pairs' entries (gpuleak's
    # trace is checked by the script).
    recorded = len(torch.cuda.memory._snapshot()["device_traces"][0]) if mode == "history" else 0
    if mode == "history" and recorded < min(HISTORY_ENTRIES, pairs):
        raise SystemExit(f"torch_overhead: PyTorch's history holds {recorded} entries only")
    print(
        f"torch_overhead mode={mode} pairs={pairs} warmup={warmup} history_entries={recorded} "
        f"ns_per_pair={wall / pairs:.1f} cpu_ns_per_pair={cpu / pairs:.1f}"
    )


if __name__ == "__main__":
    main()
