"""Real PyTorch DataLoaders under `gpuleak run` (tests/torch/dataloader/: plain scripts): every worker is
recorded from its fork to its end, named as the loader's worker, and its host memory diagnosed beside
the main process's GPU verdict: copy-on-write of a dataset held as Python objects, a worker's own leak,
nothing for a dataset in numpy arrays, the explanation for a worker the OOM killer would kill; workers
whose dataset touches CUDA are counted on the device beside the training process. torchrun's ranks
(tests/torch/ranks/) are named by their rank; a job on two machines (two torchrun launches with
--nnodes 2, each in a UTS namespace of its own host name) is read as one job, from its traces and merged
from each machine's report.

Environment: that of test_workloads.py.
"""

import json
import os
import re
import shutil
import socket
import subprocess
import sys

import pytest
from test_torch_adapter import CUDA_LIB_DIR, PACKAGE, REAL_DEVICE, REPORT, SIMDEVICE_DIR, TORCH_PYTHON
from test_workloads import DEFAULT_CAPACITY, HERE, LAUNCHER, run_script
from torch_environment import simulated_device_environment
from test_workloads import pytestmark as workload_marks
from test_torch_adapter import adapter_cache  # noqa: F401 (a fixture)

MiB = 1 << 20
SCRIPTS = os.path.join(HERE, "dataloader")
# What tests/torch/ranks/train_rank.py prints once an epoch.
RANK_LINE = re.compile(r"rank \d+ epoch \d+ loss -?\d+\.\d\d")

pytestmark = workload_marks


def traced_run(tmp_path, adapter_cache, name, alone_too=False):
    """The script's run under gpuleak run and the report's processes: the main one, then the others.
    `alone_too`: it runs alone first, and must print the same and end the same under gpuleak."""
    script = os.path.join(SCRIPTS, name)
    traced = run_script(tmp_path, script, adapter_cache, traced=True)
    if alone_too:
        plain = run_script(tmp_path, script, adapter_cache, traced=False)
        assert traced.returncode == plain.returncode, traced.stderr[-4000:]
        assert traced.stdout == plain.stdout
    else:
        assert traced.returncode == 0, traced.stderr[-4000:]
    with open(tmp_path / "run" / "report.json") as report:
        processes = json.load(report)["processes"]
    pids = {process["pid"] for process in processes}
    (main,) = [process for process in processes if process["ppid"] not in pids]
    assert main["command"][1:] == [script]
    others = [process for process in processes if process is not main]
    return traced, main, others


def workers_of(main, processes):
    workers = [process for process in processes if process["ppid"] == main["pid"]]
    assert workers, "every worker's trace is found from the main process's"
    return workers


def host_story(process):
    """The diagnosis and the host samples it judged, for an assertion's message: what a verdict that
    went wrong was made from."""
    samples = [
        "%.2f s: allocated %s, rss %s, modules %s" % (
            point["t_s"],
            None if point["anon_bytes"] is None else point["anon_bytes"] - (point["heap_free_bytes"] or 0),
            point["rss_bytes"],
            point["python_modules"],
        )
        for point in process["host"]["timeline"]
    ]
    return "\n".join([process["diagnosis"]["text"], *samples])


def check_main(main):
    assert main["host_only"] is False
    assert main["diagnosis"]["kind"] == "stable", main["diagnosis"]["text"]
    # Its dataset, built before its first CUDA call and kept, is not growth.
    assert main["diagnosis"]["host"] is None, main["diagnosis"]["host"]


def test_workers_reading_a_list_of_tuples_copy_their_parents_pages(tmp_path, adapter_cache):
    # Forking workers from a process with gpuleak's thread in it changes nothing the script sees.
    traced, main, others = traced_run(tmp_path, adapter_cache, "list_dataset.py", alone_too=True)
    check_main(main)
    workers = workers_of(main, others)
    assert sorted(worker["role"]["worker_id"] for worker in workers) == [0, 1]
    for worker in workers:
        assert worker["role"]["kind"] == "dataloader_worker"
        assert worker["role"]["start_method"] == "fork"
        assert worker["started_at"].endswith("list_dataset.py:23 in <module>"), worker["started_at"]
        assert worker["host_only"] is True
        assert worker["ended"]["how"] == "exit", "its trace records its end"
        host = worker["diagnosis"]["host"]
        assert host is not None and host["cause"] == "copy_on_write", worker["diagnosis"]["text"]
        assert host["to"]["uss_bytes"] - host["from"]["uss_bytes"] >= 64 * MiB
        assert host["to"]["rss_bytes"] - host["from"]["rss_bytes"] < (host["to"]["uss_bytes"] - host["from"]["uss_bytes"]) / 2
    with open(tmp_path / "run" / "report.txt") as report:
        text = report.read()
    assert "DataLoader worker 0" in text and "DataLoader worker 1" in text
    assert "numpy arrays or tensors" in text
    assert "(DataLoader worker" in traced.stderr, "the launcher's summary names the workers' growth"


def test_a_gpu_leak_in_the_main_process_stands_beside_its_workers_copy_on_write(tmp_path, adapter_cache):
    traced, main, others = traced_run(tmp_path, adapter_cache, "list_dataset_losses_kept.py")
    assert main["diagnosis"]["kind"] == "leak", main["diagnosis"]["text"]
    assert "list_dataset_losses_kept.py:27 in <module>" in main["growth"][0]["where"], main["growth"][0]
    for worker in workers_of(main, others):
        assert worker["diagnosis"]["host"]["cause"] == "copy_on_write", worker["diagnosis"]["text"]
    with open(tmp_path / "run" / "report.txt") as report:
        text = " ".join(report.read().split())
    # Each process's verdict in its own words: the main process's leak, the workers' copies.
    assert "Memory kept growing" in text and "numpy arrays or tensors" in text
    assert "top leak origin: " in traced.stderr and "(DataLoader worker" in traced.stderr


def test_the_same_data_in_numpy_arrays_is_stable_over_epochs_of_new_workers(tmp_path, adapter_cache):
    traced, main, others = traced_run(tmp_path, adapter_cache, "numpy_dataset.py")
    check_main(main)
    workers = workers_of(main, others)
    # Two epochs, each with workers of its own: ids restart for each.
    assert sorted(worker["role"]["worker_id"] for worker in workers) == [0, 0, 1, 1]
    for worker in workers:
        assert worker["diagnosis"]["kind"] == "stable", worker["diagnosis"]["text"]
        assert worker["diagnosis"]["host"] is None
        assert worker["ended"]["how"] == "exit"


def test_a_dataset_that_keeps_what_it_decodes_leaks_in_each_worker(tmp_path, adapter_cache):
    traced, main, others = traced_run(tmp_path, adapter_cache, "leaky_getitem.py")
    check_main(main)
    for worker in workers_of(main, others):
        host = worker["diagnosis"]["host"]
        assert host is not None and host["cause"] == "allocations", host_story(worker)
        assert "dataset" in host["text"]


def test_a_worker_killed_in_mid_epoch_is_named_with_its_last_samples(tmp_path, adapter_cache):
    traced, main, others = traced_run(tmp_path, adapter_cache, "killed_worker.py", alone_too=True)
    # The main process fails: how PyTorch words it depends on whether its SIGCHLD handler, its queue's
    # timeout or a transfer cut short sees the death first.
    assert traced.returncode != 0
    (killed,) = [worker for worker in workers_of(main, others) if worker["ended"]["how"] == "killed"]
    assert killed["role"]["kind"] == "dataloader_worker" and killed["role"]["worker_id"] == 1
    facts = killed["diagnosis"]["killed"]
    assert facts is not None and facts["last"]["rss_bytes"] >= 100 * MiB
    assert "SIGKILL" in facts["text"]
    with open(tmp_path / "run" / "report.txt") as report:
        text = report.read()
    assert "DataLoader worker 1" in text and "Killed:" in text


def test_persistent_workers_serve_every_epoch(tmp_path, adapter_cache):
    traced, main, others = traced_run(tmp_path, adapter_cache, "persistent_workers.py")
    check_main(main)
    workers = workers_of(main, others)
    assert sorted(worker["role"]["worker_id"] for worker in workers) == [0, 1]
    for worker in workers:
        assert worker["diagnosis"]["host"]["cause"] == "copy_on_write"
        # Alive through every epoch, shut down by the loader as the program ends: their traces say so.
        assert worker["ended"]["how"] in ("exit", "signal"), worker["ended"]


def test_spawned_workers_are_recorded_from_their_start_to_their_end(tmp_path, adapter_cache):
    traced, main, others = traced_run(tmp_path, adapter_cache, "spawn_workers.py")
    check_main(main)
    workers = [worker for worker in workers_of(main, others) if worker["role"]["kind"] == "dataloader_worker"]
    assert sorted(worker["role"]["worker_id"] for worker in workers) == [0, 1], [p["role"] for p in others]
    for worker in workers:
        assert worker["role"]["start_method"] == "spawn"
        assert worker["ended"]["how"] == "exit"
        assert worker["target"]["function"] == "_worker_loop"
        # Named by the line of the script whose loop started them.
        assert worker["started_at"].endswith("spawn_workers.py:24 in <module>"), worker["started_at"]
    # multiprocessing's resource tracker outlives the script a moment: the launcher waits for its end.
    (tracker,) = [process for process in others if process["role"]["kind"] == "resource_tracker"]
    assert tracker["ended"]["how"] == "exit"
    with open(tmp_path / "run" / "report.txt") as report:
        text = report.read()
    assert "DataLoader worker 0 (spawn)" in text and "DataLoader worker 1 (spawn)" in text
    assert "Killed:" not in text
    # Each imports torch and unpickles its own copy of the dataset once, at its start: not growth,
    # however short its work is against its imports (its work starts when its sys.modules is full).
    for worker in workers:
        assert worker["diagnosis"]["host"] is None, worker["diagnosis"]["host"]["text"]


def test_workers_that_touch_cuda_are_counted_on_the_device_beside_the_training_process(tmp_path, adapter_cache):
    traced, main, others = traced_run(tmp_path, adapter_cache, "cuda_in_getitem.py", alone_too=True)
    workers = [worker for worker in workers_of(main, others) if worker["role"]["kind"] == "dataloader_worker"]
    assert len(workers) == 2
    with open(tmp_path / "run" / "report.json") as report:
        (device,) = json.load(report)["run"]["shared_devices"]
    assert device["device"] == 0 and device["contexts"] == 3
    users = {user["pid"]: user for user in device["processes"]}
    assert set(users) == {main["pid"]} | {worker["pid"] for worker in workers}
    for worker in workers:
        user = users[worker["pid"]]
        # Each worker's own 1 MiB tensor, in a block of the caching allocator's 2 MiB segment.
        assert user["peak_reserved_bytes"] == 2 * MiB and user["context"], user
        assert user["context_site"].endswith("cuda_in_getitem.py:20 in Normalised.__getitem__"), user
        assert worker["contexts"][0]["where"] == user["context_site"]
    assert users[main["pid"]]["context_site"].endswith("cuda_in_getitem.py:26 in <module>")
    # Together: the workers serve every batch the training process works on, holding their memory all the
    # while, so its peak came with theirs.
    assert device["peak_reserved_bytes"] >= main["summary"]["peak_reserved_bytes"] + 2 * 2 * MiB
    with open(tmp_path / "run" / "report.txt") as report:
        text = " ".join(report.read().split())
    assert "Device 0 was used by 3 processes: together they reserved at most " in text
    assert "DataLoader workers made contexts of their own there (first at " in text
    assert ("cuda_in_getitem.py:20 in Normalised.__getitem__): each worker that touches CUDA holds its own share "
            "of the device.") in text


def test_two_loaders_read_together_number_their_workers_each_from_0(tmp_path, adapter_cache):
    traced, main, others = traced_run(tmp_path, adapter_cache, "paired_loaders.py", alone_too=True)
    check_main(main)
    workers = workers_of(main, others)
    # Each worker's id is read from its own loop's frame: told by the order of their forks, the second
    # loader's workers would number on as 2 and 3.
    assert sorted(worker["role"]["worker_id"] for worker in workers) == [0, 0, 1, 1]
    for worker in workers:
        assert worker["role"]["kind"] == "dataloader_worker"
        target = worker["target"]
        assert (target["function"], target["program"]) == ("_worker_loop", False), target
        assert target["file"].endswith("torch/utils/data/_utils/worker.py")


def test_torchruns_ranks_are_named_by_their_rank(tmp_path, adapter_cache):
    script = os.path.join(HERE, "ranks", "train_rank.py")
    launch = ("-m", "torch.distributed.run", "--nproc-per-node", "2")
    plain = run_script(tmp_path, script, adapter_cache, traced=False, launch=launch)
    traced = run_script(tmp_path, script, adapter_cache, traced=True, launch=launch)
    assert plain.returncode == 0, plain.stderr[-4000:]
    assert traced.returncode == 0, traced.stderr[-4000:]
    # The ranks print in whichever order they run, and two ranks' writes can interleave within a line
    # (with PYTHONUNBUFFERED print writes the text and its newline apart): compare the lines they print.
    assert sorted(RANK_LINE.findall(traced.stdout)) == sorted(RANK_LINE.findall(plain.stdout))
    assert len(RANK_LINE.findall(plain.stdout)) == 6, plain.stdout
    with open(tmp_path / "run" / "report.json") as report:
        processes = json.load(report)["processes"]
    pids = {process["pid"] for process in processes}
    (agent,) = [process for process in processes if process["ppid"] not in pids]
    assert agent["role"]["kind"] == "program" and agent["host_only"] is True
    ranks = [process for process in processes if process["ppid"] == agent["pid"]]
    assert sorted(rank["role"]["rank"] for rank in ranks) == [0, 1]
    for rank in ranks:
        assert rank["role"]["kind"] == "rank" and rank["role"]["world_size"] == 2
        assert rank["role"]["text"] == "rank %d of 2" % rank["role"]["rank"]
        assert rank["host_only"] is False
        assert rank["ended"]["how"] == "exit"
        assert rank["diagnosis"]["kind"] == "stable", rank["diagnosis"]["text"]
    with open(tmp_path / "run" / "report.txt") as report:
        text = report.read()
    assert "rank 0 of 2" in text and "rank 1 of 2" in text


def two_machines(tmp_path, adapter_cache, mode):
    """The job of tests/torch/ranks/two_machines.py `mode` on two machines of two ranks and two devices
    each: two torchrun launches with --nnodes 2 (c10d rendezvous on 127.0.0.1, gloo), each in a UTS
    namespace with a host name of its own (node0, node1) and under gpuleak run -o one job directory. The
    report of that directory as JSON, the same of --merge, and its text."""
    if REAL_DEVICE or shutil.which("unshare") is None or os.geteuid() != 0:
        pytest.skip("two machines on one are made with unshare -u, as root, on the simulated device")
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    environment = dict(os.environ, PYTHONWARNINGS="ignore", GLOO_SOCKET_IFNAME="lo",
                       GPULEAK_TORCH_ADAPTER_DIR=adapter_cache)
    environment.pop("PYTORCH_CUDA_ALLOC_CONF", None)
    environment.update(simulated_device_environment(SIMDEVICE_DIR, CUDA_LIB_DIR, DEFAULT_CAPACITY))
    environment["GPULEAK_SIM_DEVICES"] = "2"
    environment["PYTHONPATH"] = os.pathsep.join(filter(None, [PACKAGE, environment.get("PYTHONPATH")]))
    job = tmp_path / "job"
    launches = []
    for node in (0, 1):
        command = [LAUNCHER, "run", "--quiet", "-o", str(job), "--", TORCH_PYTHON, "-m", "torch.distributed.run",
                   "--nnodes", "2", "--node-rank", str(node), "--nproc-per-node", "2", "--rdzv-backend", "c10d",
                   "--rdzv-endpoint", "127.0.0.1:%d" % port, "--rdzv-id", "job-" + mode, "--local-addr",
                   "127.0.0.1", os.path.join(HERE, "ranks", "two_machines.py"), mode]
        launches.append(subprocess.Popen(["unshare", "-u", "sh", "-c", 'hostname "$0" && exec "$@"',
                                          "node%d" % node, *command],
                                         env=environment, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    for launch in launches:
        out, err = launch.communicate(timeout=300)
        assert launch.returncode == 0, err[-4000:]
    assert sorted(os.listdir(job)) == ["node0.node0", "node1.node1"]

    def report(*arguments):
        completed = subprocess.run([REPORT, *arguments, str(job)], capture_output=True, text=True, timeout=120)
        assert completed.returncode == 0, completed.stderr
        return completed.stdout

    direct = json.loads(report("--format", "json"))
    merged = json.loads(report("--merge", "--format", "json"))
    assert merged["job"] == direct["job"]
    assert merged["run"]["shared_devices"] == direct["run"]["shared_devices"]
    ranks = direct["job"]["ranks"]
    assert [row["rank"] for row in ranks] == [0, 1, 2, 3]
    # torchrun numbers the ranks by the machines' order at the rendezvous: two on each machine.
    hosts = {row["hostname"] for row in ranks}
    assert hosts == {"node0", "node1"}
    for row in ranks:
        assert row["local_rank"] == row["rank"] % 2
        assert [other["hostname"] for other in ranks if other["rank"] // 2 == row["rank"] // 2] == [row["hostname"]] * 2
    return direct, " ".join(report("--no-color").split())


def test_a_job_on_two_machines_in_which_one_rank_leaks_names_that_rank(tmp_path, adapter_cache):
    report, text = two_machines(tmp_path, adapter_cache, "leak")
    job = report["job"]
    assert [row["diagnosis"] for row in job["ranks"]] == ["stable", "leak", "stable", "stable"]
    assert job["ranks"][1]["top_site"].endswith("two_machines.py:25 in <module>")
    assert job["intruding"] == [] and job["failed"] == []
    assert "Only rank 1 leaks, at " in text


def test_a_job_on_two_machines_whose_ranks_touch_device_0_first_names_each_on_its_machine(tmp_path, adapter_cache):
    report, text = two_machines(tmp_path, adapter_cache, "early")
    intruding = report["job"]["intruding"]
    # Local rank 1 of each machine took device 0, its local rank 0's, before it picked its own.
    assert sorted((entry["rank"], entry["owner"]) for entry in intruding) == [(1, 0), (3, 2)]
    for entry in intruding:
        assert entry["device"] == 0 and entry["context"] is True
        assert entry["first_site"].endswith("two_machines.py:14 in <module>")
    assert len(report["run"]["shared_devices"]) == 2
    assert "made a context and reserved" in text and "torch.cuda.set_device(local_rank)" in text


def test_a_clean_job_on_two_machines_says_nothing_of_its_ranks(tmp_path, adapter_cache):
    report, text = two_machines(tmp_path, adapter_cache, "clean")
    job = report["job"]
    assert all(row["diagnosis"] == "stable" for row in job["ranks"]), job["ranks"]
    assert job["apart"] == [] and job["intruding"] == [] and job["failed"] == [] and job["shared_leaks"] == []
    assert report["run"]["shared_devices"] == []
    assert "leaks" not in text and "made a context" not in text


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q"]))
