"""Real PyTorch DataLoaders under `gpuleak run` (tests/torch/dataloader/: plain scripts): every worker is
recorded from its fork to its end, named as the loader's worker, and its host memory diagnosed beside
the main process's GPU verdict: copy-on-write of a dataset held as Python objects, a worker's own leak,
nothing for a dataset in numpy arrays, the explanation for a worker the OOM killer would kill; workers
whose dataset touches CUDA are counted on the device beside the training process. torchrun's ranks
(tests/torch/ranks/) are named by their rank.

Environment: that of test_workloads.py.
"""

import json
import os
import re
import sys

import pytest
from test_workloads import HERE, LAUNCHER, run_script
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


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q"]))
