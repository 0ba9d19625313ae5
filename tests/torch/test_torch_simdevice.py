"""Real PyTorch on the simulated CUDA device: its caching allocator must run unchanged and account
exactly, training code (matrix products, convolutions, attention, recurrent layers, optimizers) must
run, and what cannot run must fail saying so. Each scenario runs in a fresh interpreter of the
environment scripts/setup-torch.sh installs (PyTorch reads PYTORCH_CUDA_ALLOC_CONF and the simulator
reads its variables once per process) and prints one JSON line of measurements, which the tests compare
with what PyTorch must do.

Environment: GPULEAK_TEST_SIMDEVICE_DIR (the simulated device's directory of libraries and its python/;
required), GPULEAK_TORCH_DIR (the environment; default: what scripts/setup-torch.sh prints),
GPULEAK_CUDA_LIB_DIR (the CUDA 13 toolkit's libraries, which serve the rest of torch's CUDA libraries;
default /usr/local/cuda/lib64). Missing ones skip every test, saying which.
"""

import functools
import json
import os
import subprocess
import sys
import textwrap

import pytest
from torch_environment import simulated_device_environment, torch_python

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


def run_program(program, **env):
    """Runs the Python `program` under the simulated device; it must end normally."""
    environment = dict(os.environ)
    environment.pop("PYTORCH_CUDA_ALLOC_CONF", None)
    environment.update(simulated_device_environment(SIMDEVICE_DIR, CUDA_LIB_DIR, CAPACITY), PYTHONWARNINGS="ignore")
    environment.update(env)
    completed = subprocess.run(
        [TORCH_PYTHON, "-c", program], env=environment, capture_output=True, text=True, timeout=240
    )
    assert completed.returncode == 0, completed.stderr[-4000:]
    return completed


def run_torch(body, **env):
    """Runs `body` (Python; `torch` imported, `report(**values)` prints the result) under the simulated
    device and returns what it reported."""
    program = "import json, torch\n" "def report(**values):\n" "    print(json.dumps(values), flush=True)\n"
    completed = run_program(program + textwrap.dedent(body), **env)
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


def test_pinned_memory_is_told_from_pageable():
    got = run_torch(
        """
        pageable = torch.ones(1000)
        pinned = pageable.pin_memory()                           # cudaHostAlloc, asked of the driver after
        report(pageable=pageable.is_pinned(), pinned=pinned.is_pinned(), again=pinned.pin_memory().data_ptr() == pinned.data_ptr())
        """
    )
    # A tensor already pinned is pinned once: pin_memory() hands it back.
    assert got == {"pageable": False, "pinned": True, "again": True}


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


def exported_symbols(library):
    """`name@version` of every function and object the shared library defines."""
    listing = subprocess.run(["nm", "-D", "--defined-only", library], check=True, capture_output=True, text=True)
    return {line.split()[-1].replace("@@", "@") for line in listing.stdout.splitlines() if line.strip()}


# The simulated device's stand-ins for NVIDIA's libraries, and how PyTorch's imports name them: by version
# node, or for NCCL, which has none, by its functions' prefix.
STAND_INS = {
    "libcublas.so.13": "@libcublas.so.13",
    "libcublasLt.so.13": "@libcublasLt.so.13",
    "libcudnn.so.9": "@libcudnn.so.9",
    "libcufft.so.12": "@libcufft.so.12",
    "libcusolver.so.12": "@libcusolver.so.12",
    "libcusparse.so.12": "@libcusparse.so.12",
    "libnccl.so.2": "nccl",
}


@functools.cache
def torch_imports():
    """`name@version` (or `name`) of every undefined dynamic symbol of torch's libraries."""
    lib = run_torch("import os; report(lib=os.path.join(os.path.dirname(torch.__file__), 'lib'))")["lib"]
    symbols = set()
    for name in sorted(os.listdir(lib)):
        listing = subprocess.run(
            ["nm", "-D", "--undefined-only", os.path.join(lib, name)], capture_output=True, text=True
        ).stdout
        symbols |= {line.split()[-1] for line in listing.splitlines() if line.strip()}
    return symbols


@pytest.mark.parametrize("library", sorted(STAND_INS))
def test_stand_ins_define_everything_torch_imports_from_them(library):
    defined = exported_symbols(os.path.join(SIMDEVICE_DIR, library))
    mark = STAND_INS[library]
    if mark.startswith("@"):
        imported = {symbol for symbol in torch_imports() if symbol.endswith(mark)}
    else:
        imported = {symbol for symbol in torch_imports() if symbol.startswith(mark) and "@" not in symbol}
    assert imported, f"torch imports nothing from {library}"
    missing = sorted(imported - defined)
    assert not missing, f"run scripts/gen_stand_in_entry_points.py: the stand-in lacks {missing}"


# What PyTorch cannot do on the simulated device, each in the way it fails (docs/simulated-device.md,
# "What stays unsupported"): the program's code, and what the exception or the simulated library's line on stderr
# beside it must say.
UNSUPPORTED = {
    "fft": (
        "torch.fft.fft(torch.randn(64, device='cuda'))",
        "cuFFT cannot run on the simulated CUDA device; cufftCreate returned CUFFT_NOT_SUPPORTED",
    ),
    "linalg": (
        "torch.linalg.inv(torch.randn(4, 4, device='cuda'))",
        "cuSOLVER cannot run on the simulated CUDA device; cusolverDnCreate returned CUSOLVER_STATUS_NOT_INITIALIZED",
    ),
    "batched_solver": (
        "torch.linalg.lu_factor(torch.randn(16, 4, 4, device='cuda'))",
        "cuBLAS's batched solvers (getrf, getrs, geqrf, gels) cannot run on the simulated CUDA device; "
        "cublasSgetrfBatched returned CUBLAS_STATUS_NOT_SUPPORTED",
    ),
    "cudnn_turned_back_on": (
        "torch.backends.cudnn.enabled = True\n"
        "torch.nn.functional.conv2d(torch.randn(1, 3, 8, 8, device='cuda'), torch.randn(4, 3, 3, 3, device='cuda'))",
        # PyTorch creates its cuDNN handle, then fails at the convolution's first descriptor.
        "cudnn_status: CUDNN_STATUS_NOT_SUPPORTED: cuDNN cannot run on the gpuleak simulated CUDA device",
    ),
    "cusparse": (
        "import ctypes, os\n"
        "cusparse = ctypes.CDLL('libcusparse.so.12')\n"
        "cusparse.cusparseGetErrorString.restype = ctypes.c_char_p\n"
        "status = cusparse.cusparseCreate(ctypes.byref(ctypes.c_void_p()))\n"
        "raise RuntimeError(cusparse.cusparseGetErrorString(status).decode())",
        "raised RuntimeError operation not supported: cuSPARSE cannot run on the gpuleak simulated CUDA device",
    ),
    "cuda_graph": (
        "graph = torch.cuda.CUDAGraph()\n"
        "x = torch.zeros(10, device='cuda')\n"
        "with torch.cuda.graph(graph):\n"
        "    y = x * 2",
        "CUDA error: operation not supported on the gpuleak simulated CUDA device",
    ),
    "ipc": (
        "torch.zeros(10, device='cuda').untyped_storage()._share_cuda_()",
        "CUDA error: operation not supported on the gpuleak simulated CUDA device",
    ),
    "nccl": (
        "import tempfile, torch.distributed as dist\n"
        "dist.init_process_group('nccl', init_method='file://' + tempfile.mktemp(), rank=0, world_size=1)\n"
        "dist.all_reduce(torch.ones(2, device='cuda'))",
        "invalid usage: NCCL cannot run on the gpuleak simulated CUDA device",
    ),
}


@pytest.mark.parametrize("what", sorted(UNSUPPORTED))
def test_what_does_not_run_fails_naming_the_simulated_device(what):
    code, expected = UNSUPPORTED[what]
    program = "import torch\ntry:\n" + textwrap.indent(code, "    ") + "\n"
    program += "except Exception as error:\n    print('raised', type(error).__name__, str(error).splitlines()[0])\n"
    # Never a crash: the program catches the error and ends normally, its teardown included.
    completed = run_program(program)
    assert completed.stdout.startswith("raised "), completed.stdout
    assert expected in completed.stdout + completed.stderr, (completed.stdout + completed.stderr)[-4000:]


def test_cudnn_stays_off_when_a_library_looks_torch_up_before_importing_it(tmp_path):
    # transformers, accelerate and lightning ask importlib for torch's spec long before they import it.
    (tmp_path / "sitecustomize.py").write_text("import sys\nsys.stderr.write('the next sitecustomize ran\\n')\n")
    program = (
        "import importlib.util\n"
        "importlib.util.find_spec('torch')\n"
        "import torch\n"
        "print(torch.backends.cudnn.enabled, torch.backends.cuda.cudnn_sdp_enabled())\n"
    )
    # A sitecustomize further on the path (a distribution's, a virtual environment's) still runs.
    python_path = simulated_device_environment(SIMDEVICE_DIR, CUDA_LIB_DIR, CAPACITY)["PYTHONPATH"]
    completed = run_program(program, PYTHONPATH=python_path + os.pathsep + str(tmp_path))
    assert completed.stdout.split() == ["False", "False"]
    assert "the next sitecustomize ran" in completed.stderr


def test_recurrent_layers_and_optimizers_train():
    got = run_torch(
        """
        steps = {}
        for name, make in [("SGD", lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9)),
                           ("Adam", torch.optim.Adam), ("AdamW fused", lambda p: torch.optim.AdamW(p, fused=True)),
                           ("RMSprop", torch.optim.RMSprop), ("Adagrad", torch.optim.Adagrad)]:
            for layer in (torch.nn.LSTM(16, 32, num_layers=2, batch_first=True), torch.nn.GRU(16, 32, batch_first=True)):
                layer = layer.cuda()
                optimizer = make(layer.parameters())
                output, _ = layer(torch.randn(4, 10, 16, device="cuda"))
                output.sum().backward()
                optimizer.step()
                steps[f"{name} {type(layer).__name__}"] = len(optimizer.state)
        report(steps=steps)
        """
    )
    # Every optimizer made its state for every parameter: LSTM of two layers 8, GRU 4.
    assert got["steps"] == {
        f"{name} {layer}": count
        for name in ("SGD", "Adam", "AdamW fused", "RMSprop", "Adagrad")
        for layer, count in (("LSTM", 8), ("GRU", 4))
    }


def test_matrix_products_take_their_workspace_from_the_caching_allocator():
    # The loop the caching-allocator articles show. PyTorch hands each cuBLAS handle a workspace from
    # its caching allocator: 32 MiB (4096 KiB x 8) on a device of compute capability 9.0, as on an H100.
    got = run_torch(
        """
        a = torch.randn(2000, 2000).to("cuda")
        b = torch.randn(2000, 2000).to("cuda")
        before = (torch.cuda.memory_allocated(), torch.cuda.memory_reserved())
        for _ in range(5):
            c = torch.matmul(a, b)
            del c
        after = (torch.cuda.memory_allocated(), torch.cuda.memory_reserved())
        sizes = sorted(block["size"] for segment in torch.cuda.memory_snapshot() for block in segment["blocks"])
        report(before=before, after=after, sizes=sizes, shape=list(torch.matmul(a, b).shape))
        """
    )
    tensor = 16 * MiB  # 2000 x 2000 x 4 bytes, rounded up to the large pool's 2 MiB
    workspace = 32 * MiB
    assert got["before"] == [2 * tensor, 2 * tensor]
    assert got["after"] == [2 * tensor + workspace, 3 * tensor + workspace]
    assert got["sizes"] == [tensor, tensor, tensor, workspace]
    assert got["shape"] == [2000, 2000]


def test_cublas_workspace_follows_cublas_workspace_config():
    got = run_torch(
        """
        a = torch.ones(64, 64, device="cuda")
        base = torch.cuda.memory_allocated()
        (a @ a).sum()
        report(workspace=torch.cuda.memory_allocated() - base)
        """,
        CUBLAS_WORKSPACE_CONFIG=":4096:2",
    )
    # 4096 KiB x 2; the product and its sum are freed.
    assert got["workspace"] == 8 * MiB


def test_linear_layers_train_with_adam():
    got = run_torch(
        """
        model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 10)).cuda()
        optimizer = torch.optim.Adam(model.parameters())
        for _ in range(3):
            x, y = torch.randn(32, 64, device="cuda"), torch.randint(0, 10, (32,), device="cuda")
            loss = torch.nn.functional.cross_entropy(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        grads = all(p.grad is not None and p.grad.shape == p.shape for p in model.parameters())
        report(grads=grads, states=len(optimizer.state), loss_shape=list(loss.shape))
        """
    )
    assert got == {"grads": True, "states": 4, "loss_shape": []}


def test_convolutions_and_batch_norm_train_on_pytorchs_own_kernels():
    got = run_torch(
        """
        model = torch.nn.Sequential(
            torch.nn.Conv2d(3, 16, 3, padding=1), torch.nn.BatchNorm2d(16), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
            torch.nn.Dropout(0.25), torch.nn.Flatten(), torch.nn.Linear(16 * 16 * 16, 10)).cuda()
        x = torch.randn(8, 3, 32, 32, device="cuda")
        loss = torch.nn.functional.cross_entropy(model(x), torch.randint(0, 10, (8,), device="cuda"))
        loss.backward()
        report(cudnn=torch.backends.cudnn.enabled, grad=list(model[0].weight.grad.shape),
               running_mean=list(model[1].running_mean.shape))
        """
    )
    # The test bed keeps PyTorch off cuDNN, which cannot run on the simulated device.
    assert got == {"cudnn": False, "grad": [16, 3, 3, 3], "running_mean": [16]}


def test_attention_and_mixed_precision():
    got = run_torch(
        """
        attention = torch.nn.MultiheadAttention(64, 4, batch_first=True).cuda()
        scaler = torch.amp.GradScaler()
        x = torch.randn(2, 33, 64, device="cuda")
        with torch.autocast("cuda", dtype=torch.float16):
            out, _ = attention(x, x, x, need_weights=False)
            y = torch.nn.functional.scaled_dot_product_attention(out[:, None], out[:, None], out[:, None], is_causal=True)
        scaler.scale(y.float().sum()).backward()
        report(dtype=str(y.dtype), shape=list(y.shape), grad=attention.in_proj_weight.grad is not None)
        """
    )
    assert got == {"dtype": "torch.float16", "shape": [2, 1, 33, 64], "grad": True}


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q"]))
