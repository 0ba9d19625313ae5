"""What a recorded fork costs the child before it runs on: run by bench/fork_cost.sh, it holds MIB MiB of
its own, then forks COUNT children one after another; each writes a byte to a pipe as soon as fork()
returns into it and exits, and the parent times fork() to that byte. Under libgpuleak.so the child's
trace is made, and its first host sample taken, inside fork(), so this is what a DataLoader's worker
waits before its first line runs. Prints the median and the 90th percentile in microseconds.

Usage: fork_cost.py MIB COUNT LABEL"""

import os
import statistics
import sys
import time


def main():
    mib, count, label = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
    held = bytearray(mib << 20)
    for offset in range(0, len(held), 4096):
        held[offset] = 1
    took = []
    for _ in range(count):
        reader, writer = os.pipe()
        start = time.perf_counter_ns()
        child = os.fork()
        if child == 0:
            os.write(writer, b"x")
            os._exit(0)
        os.read(reader, 1)
        took.append((time.perf_counter_ns() - start) / 1000)
        os.waitpid(child, 0)
        os.close(reader)
        os.close(writer)
    took.sort()
    median, ninetieth = statistics.median(took), took[int(0.9 * len(took))]
    print(f"{label:<34} holding {mib:>4} MiB: fork to the child's first line: median {median:8.0f} us, "
          f"90th percentile {ninetieth:8.0f} us ({count} forks)")


if __name__ == "__main__":
    main()
