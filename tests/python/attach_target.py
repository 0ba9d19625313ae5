"""A training loop that gpuleak attach records while it runs, on the simulated device through a native
library (as a C extension calls CUDA): each step makes its batch and frees it, and keeps its output in a
list with --keep (the leak), else frees it too; with --idle it makes its model's memory once and then
touches the device no more. It runs until the file named by its first argument
exists, prints only "started" and "stopped", and exits with status 3: what it prints and its status must
be the same whether or not it was attached to."""

import ctypes
import os
import sys
import time

buffers = ctypes.CDLL(os.environ["GPULEAK_TEST_DEVICE_BUFFERS"])
buffers.allocate.restype = ctypes.c_void_p
buffers.allocate.argtypes = [ctypes.c_size_t]
buffers.release.argtypes = [ctypes.c_void_p]

stop = sys.argv[1]
keep = "--keep" in sys.argv
idle = "--idle" in sys.argv
weights = buffers.allocate(16 << 20)
outputs = []
print("started", flush=True)
while idle and not os.path.exists(stop):
    time.sleep(0.005)
while not os.path.exists(stop):
    batch = buffers.allocate(4 << 20)
    output = buffers.allocate(64 << 10)
    if keep:
        outputs.append(output)
    else:
        buffers.release(output)
    buffers.release(batch)
    time.sleep(0.005)
print("stopped", flush=True)
sys.exit(3)
