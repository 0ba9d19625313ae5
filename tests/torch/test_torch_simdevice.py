"""Real PyTorch on the simulated CUDA device: its caching allocator must run unchanged and account
exactly. Each scenario runs in a fresh interpreter of the environment scripts/setup-torch.sh installs
(PyTorch reads PYTORCH_CUDA_ALLOC_CONF and the simulator reads its variables once per process) and
prints one JSON line of measurements, which the tests compare with what PyTorch's allocator must do.

Environment: GPULEAK_TEST_SIMDEVICE_DIR (the simulated libcudart.so.13 and libcuda.so.1; required),
GPULEAK_TORCH_DIR (the environment; default: what scripts/setup-torch.sh prints), GPULEAK_CUDA_LIB_DIR
(the CUDA 13 toolkit's libraries, which serve torch's cuBLAS, cuDNN, NCCL...; default
/usr/local/cuda/lib64). Missing ones skip every test, saying which.
"""

import json
import os
import subprocess
import sys
import textwrap

import pytest
from torch_environment import torch_python

MiB = 1 << 20
GiB = 1 << 30
# The simulated device's size in these tests: small enough that an out-of-memory test is quick.
CAPACITY = 4 * GiB


SIMDEVICE_DIR = os.environ.get("GPULEAK_TEST_SIMDEVICE_DIR", "")
CUDA_LIB_DIR = os.environ.get("GPULEAK_CUDA_LIB_DIR", "/usr/local/cuda/lib64")
TORCH_PYTHON = torch_python()

pytestmark = [
    pytest.mark.skipif(
        not os.path.exists(os.path.join(SIMDEVICE_DIR, "libcudart.so.13")),
        reason="GPULEAK_TEST_SIMDEVICE_DIR does not hold the simulated libcudart.so.13",
    ),
    pytest.mark.skipif(
        TORCH_PYTHON is None,
        reason="no PyTorch environment: run scripts/setup-torch.sh (or set GPULEAK_TORCH_DIR)",
    ),
    pytest.mark.skipif(
        not os.path.exists(os.path.join(CUDA_LIB_DIR, "libcublas.so.13")),
        reason=f"no CUDA 13 toolkit libraries in {CUDA_LIB_DIR} (set GPULEAK_CUDA_LIB_DIR)",
    ),
]


def run_torch(body, **env):
    """Runs `body` (Python; `torch` imported, `report(**values)` prints the result) under the simulated
    device and returns what it reported."""
    program = "import json, torch\n" "def report(**values):\n" "    print(json.dumps(values), flush=True)\n"
    program += textwrap.dedent(body)
    environment = dict(os.environ)
    environment.pop("PYTORCH_CUDA_ALLOC_CONF", None)
    environment.update(
        LD_LIBRARY_PATH=os.pathsep.join([SIMDEVICE_DIR, CUDA_LIB_DIR]),
        GPULEAK_SIM_CAPACITY=str(CAPACITY),
        GPULEAK_SIM_QUIET="1",
        PYTHONWARNINGS="ignore",
    )
    environment.update(env)
    completed = subprocess.run(
        [TORCH_PYTHON, "-c", program], env=environment, capture_output=True, text=True, timeout=240
    )
    assert completed.returncode == 0, completed.stderr[-4000:]
    return json.loads(completed.stdout.strip().splitlines()[-1])


def test_cuda_is_available_and_says_simulated():
    got = run_torch(
        """
        props = torch.cuda.get_device_properties(0)
        report(available=torch.cuda.is_available(), count=torch.cuda.device_count(),
               name=torch.cuda.get_device_name(), total=props.total_memory,
               capability=list(torch.cuda.get_device_capability()),
               cuda=torch.version.cuda, arch_list=torch.cuda.get_arch_list())
        """
    )
    assert got["available"] is True
    assert got["count"] == 1
    assert "simulated" in got["name"]
    assert got["total"] == CAPACITY
    assert got["cuda"].startswith("13.")
    # PyTorch carries kernels for the capability the simulated device claims, so it warns of nothing.
    assert f"sm_{got['capability'][0]}{got['capability'][1]}" in got["arch_list"]


def test_device_count_follows_the_simulator():
    got = run_torch("report(count=torch.cuda.device_count())", GPULEAK_SIM_DEVICES="2")
    assert got["count"] == 2


def test_caching_allocator_accounts_exactly():
    got = run_torch(
        """
        free0, total = torch.cuda.mem_get_info()
        x = torch.empty(1 << 20, device="cuda")                  # 4 MiB of float32
        after_empty = (torch.cuda.memory_allocated(), torch.cuda.memory_reserved())
        y = torch.zeros(1 << 20, device="cuda")                  # a fill kernel: a no-op launch
        z = x + y                                                # an elementwise kernel
        after_ops = (torch.cuda.memory_allocated(), torch.cuda.memory_reserved())
        free_held, _ = torch.cuda.mem_get_info()
        del x, y, z
        after_del = (torch.cuda.memory_allocated(), torch.cuda.memory_reserved())
        peak = torch.cuda.max_memory_allocated()
        torch.cuda.empty_cache()
        after_empty_cache = (torch.cuda.memory_allocated(), torch.cuda.memory_reserved())
        free_end, _ = torch.cuda.mem_get_info()
        stats = torch.cuda.memory_stats()
        report(free0=free0, total=total, after_empty=after_empty, after_ops=after_ops, free_held=free_held,
               after_del=after_del, peak=peak, after_empty_cache=after_empty_cache, free_end=free_end,
               segments_allocated=stats["segment.all.allocated"], segments_freed=stats["segment.all.freed"],
               allocations=stats["allocation.all.allocated"], reserved_peak=stats["reserved_bytes.all.peak"])
        """
    )
    assert got["total"] == CAPACITY
    assert got["free0"] == CAPACITY
    # A 4 MiB request is served from a 20 MiB segment of the large pool (kLargeBuffer).
    assert got["after_empty"] == [4 * MiB, 20 * MiB]
    # Three 4 MiB tensors fit in that one segment.
    assert got["after_ops"] == [12 * MiB, 20 * MiB]
    # The simulator charged exactly what the allocator reserved.
    assert got["free_held"] == CAPACITY - 20 * MiB
    # Freed blocks stay cached ...
    assert got["after_del"] == [0, 20 * MiB]
    assert got["peak"] == 12 * MiB
    # ... until empty_cache gives the segment back with cudaFree.
    assert got["after_empty_cache"] == [0, 0]
    assert got["free_end"] == CAPACITY
    assert got["segments_allocated"] == 1 and got["segments_freed"] == 1
    assert got["allocations"] == 3
    assert got["reserved_peak"] == 20 * MiB


def test_copies_keep_their_contents():
    got = run_torch(
        """
        host = torch.arange(1000, dtype=torch.float32)
        device = host.cuda()                                     # cudaMemcpyAsync host to device
        back = device.cpu()                                      # and back
        report(equal=bool(torch.equal(host, back)), device=str(device.device))
        """
    )
    assert got == {"equal": True, "device": "cuda:0"}


def test_expandable_segments_map_and_unmap():
    got = run_torch(
        """
        x = torch.empty(1 << 20, device="cuda")
        y = torch.ones(3000, 3000, device="cuda")
        held = (torch.cuda.memory_allocated(), torch.cuda.memory_reserved())
        free_held, _ = torch.cuda.mem_get_info()
        segments = [s["segment_type"] for s in torch.cuda.memory._snapshot()["segments"]]
        del x, y
        torch.cuda.empty_cache()
        free_end, _ = torch.cuda.mem_get_info()
        report(held=held, free_held=free_held, segments=segments,
               after=(torch.cuda.memory_allocated(), torch.cuda.memory_reserved()), free_end=free_end)
        """,
        PYTORCH_CUDA_ALLOC_CONF="expandable_segments:True",
    )
    allocated, reserved = got["held"]
    assert allocated == 4 * MiB + 3000 * 3000 * 4 + 512 - (3000 * 3000 * 4) % 512
    # One growing segment, mapped 2 MiB page by page through cuMemCreate/cuMemMap.
    assert got["segments"] == ["large"]
    assert reserved % (2 * MiB) == 0 and allocated <= reserved < allocated + 2 * MiB
    assert got["free_held"] == CAPACITY - reserved
    assert got["after"] == [0, 0]
    assert got["free_end"] == CAPACITY


def test_memory_history_records_allocations():
    got = run_torch(
        """
        torch.cuda.memory._record_memory_history(max_entries=100)
        x = torch.empty(1 << 20, device="cuda")
        del x
        snapshot = torch.cuda.memory._snapshot()
        torch.cuda.memory._record_memory_history(enabled=None)
        report(actions=[(e["action"], e["size"]) for e in snapshot["device_traces"][0]])
        """
    )
    assert ["segment_alloc", 20 * MiB] in got["actions"]
    assert ["alloc", 4 * MiB] in got["actions"]
    assert ["free_requested", 4 * MiB] in got["actions"]


def test_out_of_memory_is_torch_oom():
    got = run_torch(
        """
        try:
            torch.empty(CAPACITY + 1, dtype=torch.uint8, device="cuda")
            report(raised=None)
        except torch.OutOfMemoryError as error:
            report(raised=type(error).__name__, reserved=torch.cuda.memory_reserved(),
                   ooms=torch.cuda.memory_stats()["num_ooms"])
        """.replace(
            "CAPACITY", str(CAPACITY)
        )
    )
    assert got == {"raised": "OutOfMemoryError", "reserved": 0, "ooms": 1}


def test_streams_events_and_synchronisation():
    got = run_torch(
        """
        stream = torch.cuda.Stream(priority=-1)
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        with torch.cuda.stream(stream):
            start.record()
            x = torch.zeros(1000, device="cuda")
            end.record()
        end.synchronize()
        torch.cuda.current_stream().wait_stream(stream)
        torch.cuda.synchronize()
        report(elapsed=start.elapsed_time(end), done=stream.query(), priority=stream.priority,
               range=list(torch.cuda.Stream.priority_range()))
        """
    )
    assert got["elapsed"] >= 0
    assert got["done"] is True
    assert got["priority"] == -1
    # The simulator offers priorities 0 to -5; PyTorch uses as many of them as it was built for.
    least, greatest = got["range"]
    assert least == 0 and -5 <= greatest < 0


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q"]))
