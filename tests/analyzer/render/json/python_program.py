"""A Python program whose report has what only Python programs and gpuleak's Python side make: Python frames
of the program's own code, markers, allocations and a failure on threads it started, a multiprocessing child
with its target, a notebook cell's named source and the error it ended with, records of what held the memory
(as gpuleak.why() writes them, for the site the report shows the steps' buffers at), and the out-of-memory
error the program ends with.

Run under libgpuleak.so on the simulated device, with SIMDEVICE_DIR and GPULEAK_REPORT set, and GPULEAK_WHY=none
so that the records are these alone.
"""

import ctypes
import json
import multiprocessing
import os
import subprocess
import sys
import threading
import time

cudart = ctypes.CDLL(os.path.join(os.environ["SIMDEVICE_DIR"], "libcudart.so.13"))
cudart.cudaMalloc.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_size_t]
# libgpuleak.so's C API, preloaded; PyDLL keeps the GIL, which gpuleak_cell_error needs.
gpuleak = ctypes.PyDLL(None)
kept = []


def allocate(size):
    pointer = ctypes.c_void_p()
    return pointer if cudart.cudaMalloc(ctypes.byref(pointer), size) == 0 else None


def train_step():
    kept.append(allocate(3 << 20))


def on_a_thread(target):
    thread = threading.Thread(target=target)
    thread.start()
    thread.join()


def epoch():
    for step in range(4):
        train_step()


def worker():
    kept.append(allocate(1 << 20))
    # Long enough for the samples that read what the child runs.
    time.sleep(0.5)


def record(label, moment, sites, holders, unreached, problem="", **extra):
    document = dict(moment=moment, seconds=0.01, objects_searched=1000, stopped=False, problem=problem,
                    saved_tensors_read=True, sites=sites, holders=holders, unreached=unreached, **extra)
    gpuleak.gpuleak_retainers(label.encode(), json.dumps(document).encode())


def largest_site():
    path = ctypes.create_string_buffer(4096)
    gpuleak.gpuleak_trace_path(path, len(path))
    environment = {name: value for name, value in os.environ.items() if name != "LD_PRELOAD"}
    report = subprocess.run([os.environ["GPULEAK_REPORT"], "--format", "json", path.value.decode()],
                            env=environment, stdout=subprocess.PIPE, check=True)
    (process,) = [entry for entry in json.loads(report.stdout)["processes"] if entry["pid"] == os.getpid()]
    return max(process["leaks"], key=lambda site: site["bytes"])


for number in range(3):
    gpuleak.gpuleak_mark(b"epoch %d" % number)
    on_a_thread(epoch)
on_a_thread(lambda: allocate(1 << 42))

child = multiprocessing.get_context("fork").Process(target=worker)
child.start()
child.join()

CELL = "train_step()\nraise KeyError('no such column')\n"
gpuleak.gpuleak_name_source(b"<cell-1>", b"cell [1]", CELL.encode())
gpuleak.gpuleak_mark(b"cell [1]")
try:
    exec(compile(CELL, "<cell-1>", "exec"), globals())
except KeyError as error:
    # What IPython leaves for gpuleak_cell_error once it has shown a cell's exception.
    sys.last_exc = sys.last_value = error
    sys.last_type, sys.last_traceback = type(error), error.__traceback__
    gpuleak.gpuleak_cell_error(b"cell [1]")

assert allocate(1 << 42) is None

site = largest_site()
sites = [{"stack_id": site["stack_id"], "kind": site["kind"], "bytes": site["bytes"]}]
# A running total's graph that joins every step's passes, held by a global: spent graphs, and what autograd
# saved for them kept for backward.
holder = {
    "root": "`kept`, a list in __main__ with %d items" % len(kept),
    "kind": "global",
    "bytes": site["bytes"],
    "tensors": site["count"],
    "sites": [[0, site["bytes"], "kept[0]"]],
    "path": "kept[0]",
    "through": ["autograd graph", "saved for backward"],
    "saved": [[0, site["bytes"]]],
    "graph": {"path": "kept[0]", "nodes": 40, "passes": 12, "spent_passes": 16, "spent_by_one": 16,
              "address": kept[0].value, "bytes": 3 << 20},
    "own": "",
    "owner": "Net",
    "models": 1,
    "advice": ["add `loss.item()` (a number)"],
}
record("out of memory on device 0", "out_of_memory", sites, [], [[0, site["bytes"]]], device=0)
record("gpuleak.why()", "on_demand", sites, [], [], problem="the search broke")
record("exit", "exit", sites, [holder], [])
raise RuntimeError("CUDA out of memory. Tried to allocate 4.00 TiB")
