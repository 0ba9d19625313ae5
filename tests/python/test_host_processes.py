"""Which Python processes leave a trace under libgpuleak.so, and what their traces say, on every CPython
3.10+: a program that never uses CUDA is recorded for host memory from its start; its forked children
(a multiprocessing fork pool's workers) from their fork, named as such; spawned interpreters from their
start, found from their parent; a fork that runs another program leaves nothing.

Environment: GPULEAK_TEST_LIBRARY, GPULEAK_TEST_REPORT (ctest sets them).
"""

import contextlib
import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest


def needed(name):
    value = os.environ.get(name)
    if not value:
        pytest.skip("%s is not set (ctest sets it)" % name)
    return value


def maps_of(pid):
    """What the process maps: nothing once it has ended (a zombie maps nothing)."""
    try:
        with open("/proc/%d/maps" % pid) as maps:
            return maps.read()
    except OSError:
        return ""


def run(tmp_path, body, **extra_env):
    """Runs `body` under libgpuleak.so; returns the process and the report of every trace it left."""
    script = tmp_path / "script.py"
    script.write_text(textwrap.dedent(body), encoding="utf-8")
    env = dict(os.environ, LD_PRELOAD=needed("GPULEAK_TEST_LIBRARY"), GPULEAK_OUTPUT=str(tmp_path / "trace.%p"))
    env.update(extra_env)
    process = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=120)
    assert process.returncode == 0, process.stderr
    traces = sorted(str(path) for path in tmp_path.glob("trace.*"))
    if not traces:
        return process, []
    report = subprocess.run(
        [needed("GPULEAK_TEST_REPORT"), "--format", "json", *traces], capture_output=True, text=True, timeout=120
    )
    assert report.returncode == 0, report.stderr
    return process, json.loads(report.stdout)["processes"]


def found_from(trace):
    """The report of `trace` alone: the processes found from it (its children's traces beside it)."""
    report = subprocess.run(
        [needed("GPULEAK_TEST_REPORT"), "--format", "json", trace], capture_output=True, text=True, timeout=120
    )
    assert report.returncode == 0, report.stderr
    return {p["pid"]: p["ended"]["how"] for p in json.loads(report.stdout)["processes"]}


def test_a_program_that_never_uses_cuda_is_recorded_from_its_start_for_host_memory(tmp_path):
    # 64 MiB held for a few sampling intervals.
    process, processes = run(tmp_path, 'import time\nkept = b"x" * (64 << 20)\ntime.sleep(0.5)\nprint("done")\n')
    assert process.stdout == "done\n" and process.stderr == ""
    (only,) = processes
    assert only["host_only"] is True
    assert {key: only["ended"][key] for key in ("how", "code", "signal", "sender")} == {
        "how": "exit", "code": 0, "signal": None, "sender": None
    }
    assert only["role"]["kind"] == "program"
    # From before the 64 MiB to after it.
    timeline = only["host"]["timeline"]
    assert timeline[0]["rss_bytes"] < 64 << 20 <= only["host"]["peak_rss_bytes"]
    assert timeline[0]["uss_bytes"] is not None and timeline[0]["shmem_bytes"] is not None


def test_a_program_that_never_uses_cuda_and_keeps_what_it_makes_grows(tmp_path):
    # A global list that keeps 8 MiB a step; the interpreter's teardown frees it before the sample at exit.
    process, processes = run(
        tmp_path,
        """
        import time
        kept = []
        for step in range(30):
            kept.append(b"x" * (8 << 20))
            time.sleep(0.05)
        """,
    )
    (only,) = processes
    assert only["diagnosis"]["kind"] == "host_ram_growth", only["diagnosis"]["text"]
    assert only["diagnosis"]["host"]["cause"] == "allocations"
    assert only["diagnosis"]["host"]["growth_bytes"] >= 128 << 20
    # The text names a plain program by its command line.
    text = subprocess.run(
        [needed("GPULEAK_TEST_REPORT"), *sorted(str(path) for path in tmp_path.glob("trace.*"))],
        capture_output=True,
        text=True,
        timeout=120,
    ).stdout
    header = next(line for line in text.splitlines() if line.startswith("process %d " % only["pid"]))
    # The interpreter by its name, as the user typed it.
    assert header.endswith(": %s %s" % (os.path.basename(sys.executable), tmp_path / "script.py")), header
    assert "Diagnosis: host_ram_growth" in text


def test_the_sample_at_exit_reads_sys_modules_where_python_did_not_tear_down(tmp_path):
    # A forked child ends through os._exit, its objects untouched; its parent finalizes first.
    _, processes = run(
        tmp_path,
        """
        import multiprocessing, time
        def work():
            time.sleep(0.5)
        if __name__ == "__main__":
            child = multiprocessing.get_context("fork").Process(target=work)
            child.start()
            child.join()
            time.sleep(0.3)
        """,
        PYTHONWARNINGS="ignore::DeprecationWarning",
    )
    main = next(p for p in processes if p["role"]["kind"] == "program")
    (child,) = [p for p in processes if p["ppid"] == main["pid"]]
    assert main["host"]["timeline"][-1]["python_modules"] is None
    assert child["host"]["timeline"][-1]["python_modules"] > 0


def test_a_program_whose_imports_take_most_of_its_run_is_not_growing(tmp_path):
    # Imports that bring memory with them (as torch's do) for most of the run, then a short flat work.
    _, processes = run(
        tmp_path,
        """
        import ctypes
        import importlib
        import time

        held = []
        # Never freed, not even as the interpreter finalizes: its last samples still hold it all.
        ctypes.pythonapi.Py_IncRef(ctypes.py_object(held))
        for name in ["json", "csv", "decimal", "argparse", "email.parser", "http.client", "xml.dom.minidom",
                     "unittest", "asyncio", "sqlite3", "logging.handlers", "zipfile", "tarfile", "statistics"]:
            importlib.import_module(name)
            held.append(b"x" * (24 << 20))
            time.sleep(0.15)
        time.sleep(0.2)
        print("done")
        """,
    )
    (only,) = processes
    assert only["host_only"] is True
    counts = [point["python_modules"] for point in only["host"]["timeline"] if point["python_modules"] is not None]
    assert counts and counts[0] < counts[-1], "sys.modules is read at every sample"
    assert only["diagnosis"]["host"] is None, only["diagnosis"]["host"]


def test_gpuleak_all_processes_0_records_only_processes_that_use_cuda(tmp_path):
    _, processes = run(tmp_path, 'print("done")\n', GPULEAK_ALL_PROCESSES="0")
    assert processes == []


def pool_of_two(method):
    """A script whose pool of two workers, started by `method`, prints 328350."""
    return """
        import multiprocessing

        def square(x):
            return x * x

        if __name__ == "__main__":
            context = multiprocessing.get_context("%s")
            # Both workers past their start before the work, which one of them alone may finish, and the
            # pool's end, which terminates them: a worker killed inside its fork leaves no trace.
            started = context.Barrier(3)
            with context.Pool(2, initializer=started.wait) as pool:
                started.wait()
                print(sum(pool.map(square, range(100))))
    """ % method


def test_a_fork_pools_workers_are_recorded_from_their_fork_to_their_end(tmp_path):
    process, processes = run(tmp_path, pool_of_two("fork"))
    assert process.stdout == "328350\n"
    main = next(p for p in processes if p["role"]["kind"] == "program")
    # Forking takes no GPU trace: what forked is told without the stack.
    assert main["host_only"] is True
    workers = [p for p in processes if p["ppid"] == main["pid"]]
    assert len(workers) == 2
    for worker in workers:
        assert worker["role"]["kind"] == "forked_worker", worker["role"]
        assert worker["host_only"] is True
        assert worker["ended"]["how"] in ("exit", "signal"), "a pool terminates its workers"
        if worker["ended"]["how"] == "signal":
            sender = worker["ended"]["sender"]
            assert sender["kind"] == "process" and sender["pid"] == main["pid"] and sender["parent"], sender
    # The main trace alone finds them, with how they ended.
    found = found_from(main["trace"])
    assert all(found.get(worker["pid"]) == worker["ended"]["how"] for worker in workers), found


def test_spawned_interpreters_are_found_from_their_parent(tmp_path):
    body = """
        import multiprocessing

        def hello():
            print("child")

        if __name__ == "__main__":
            child = multiprocessing.get_context("spawn").Process(target=hello)
            child.start()
            child.join()
    """
    process, processes = run(tmp_path, body)
    assert process.stdout == "child\n"
    main = next(p for p in processes if p["command"][-1].endswith("script.py"))
    assert main["role"]["kind"] == "program"
    (spawned,) = [p for p in processes if p["role"]["kind"] == "spawned_child"]
    assert spawned["ppid"] == main["pid"]
    assert spawned["role"]["start_method"] == "spawn"
    assert spawned["ended"]["how"] == "exit"
    # The main trace alone finds the spawned interpreter too, a new image, by its parent pid and start time.
    assert found_from(main["trace"]).get(spawned["pid"]) == "exit"
    # multiprocessing's helper is named as such. It reads its pipe to the end after the program's exit,
    # so it may still be running when the report is made, but it was not killed.
    (tracker,) = [p for p in processes if p["role"]["kind"] == "resource_tracker"]
    assert tracker["ppid"] == main["pid"]
    assert tracker["ended"]["how"] in ("exit", "running")
    assert tracker["diagnosis"]["killed"] is None


def test_a_multiprocessing_childs_target_is_named_whatever_started_it(tmp_path):
    body = """
        import multiprocessing
        import time

        def crunch(seconds):
            time.sleep(seconds)

        if __name__ == "__main__":
            for method in ("spawn", "fork", "forkserver"):
                # Long enough for a few of the child's samples, which look for what it runs.
                child = multiprocessing.get_context(method).Process(target=crunch, args=(0.6,))
                child.start()
                child.join()
    """
    _, processes = run(tmp_path, body)
    script = tmp_path / "script.py"
    line = script.read_text().splitlines().index("def crunch(seconds):") + 1
    children = [p for p in processes if p["target"] is not None]
    assert sorted(p["role"]["start_method"] for p in children) == ["fork", "forkserver", "spawn"]
    for child in children:
        assert child["target"] == {"function": "crunch", "file": str(script), "line": line, "program": True}
    # The program, multiprocessing's resource tracker and its fork server run no target of a Process.
    assert len(processes) == 6
    text = subprocess.run(
        [needed("GPULEAK_TEST_REPORT"), *sorted(str(path) for path in tmp_path.glob("trace.*"))],
        capture_output=True, text=True, timeout=120,
    ).stdout
    assert text.count("  runs       %s:%d in crunch\n" % (script, line)) == 3
    assert text.count("multiprocessing child (spawn) running crunch") == 1
    assert text.count("multiprocessing worker (fork) running crunch") == 1
    assert text.count("multiprocessing worker (forkserver) running crunch") == 1


# Where torch keeps the functions whose frames a DataLoader's workers show: a stand-in with the same files
# and the same signature, so that every interpreter under test reads a worker's id as with torch.
FAKE_WORKER_LOOP = """
import time

def _worker_loop(dataset_kind, dataset, index_queue, data_queue, done_event, auto_collation, collate_fn,
                 drop_last, base_seed, init_fn, worker_id, num_workers, persistent_workers, shared_seed):
    time.sleep(0.6)
"""
FAKE_DATALOADER = """
import multiprocessing
from torch.utils.data._utils.worker import _worker_loop

def start_workers(method, ids):
    context = multiprocessing.get_context(method)
    workers = [context.Process(target=_worker_loop, args=(None,) * 10 + (i, 8, False, 0)) for i in ids]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
"""


def test_a_dataloader_workers_id_is_read_from_its_loop(tmp_path):
    data = tmp_path / "stand-in" / "torch" / "utils" / "data"
    (data / "_utils").mkdir(parents=True)
    for package in (data.parent.parent, data.parent, data, data / "_utils"):
        (package / "__init__.py").write_text("")
    (data / "_utils" / "worker.py").write_text(FAKE_WORKER_LOOP)
    (data / "dataloader.py").write_text(FAKE_DATALOADER)
    body = """
        import sys
        sys.path.insert(0, %r)
        from torch.utils.data.dataloader import start_workers

        if __name__ == "__main__":
            # Told by their order, these would be workers 0 and 1, then 0; the fork server's child is
            # not even the program's (the server's stack has none of the DataLoader's frames).
            start_workers("fork", [5, 3])
            start_workers("spawn", [6])
            start_workers("forkserver", [7])
    """ % str(tmp_path / "stand-in")
    _, processes = run(tmp_path, body)
    workers = [p for p in processes if p["role"]["kind"] == "dataloader_worker"]
    assert sorted((p["role"]["start_method"], p["role"]["worker_id"]) for p in workers) == [
        ("fork", 3), ("fork", 5), ("forkserver", 7), ("spawn", 6)
    ], [p["role"] for p in processes]
    for worker in workers:
        assert worker["target"]["function"] == "_worker_loop"
        assert worker["role"]["text"].startswith("DataLoader worker %d" % worker["role"]["worker_id"])


def test_a_process_subclass_is_named_by_its_own_run(tmp_path):
    body = """
        import multiprocessing
        import time

        class Prefetcher(multiprocessing.Process):
            def run(self):
                time.sleep(0.6)

        if __name__ == "__main__":
            child = Prefetcher()
            child.start()
            child.join()
    """
    _, processes = run(tmp_path, body)
    (child,) = [p for p in processes if p["target"] is not None]
    expected = "Prefetcher.run" if sys.version_info >= (3, 11) else "run"
    assert (child["target"]["function"], child["target"]["program"]) == (expected, True)


def test_a_forkserver_pools_workers_are_named_as_the_fork_servers(tmp_path):
    process, processes = run(tmp_path, pool_of_two("forkserver"))
    assert process.stdout == "328350\n"
    main = next(p for p in processes if p["command"][-1].endswith("script.py"))
    (server,) = [p for p in processes if p["role"]["kind"] == "fork_server"]
    assert server["ppid"] == main["pid"]
    workers = [p for p in processes if p["ppid"] == server["pid"]]
    assert len(workers) == 2
    for worker in workers:
        assert worker["role"]["kind"] == "forked_worker"
        assert worker["role"]["start_method"] == "forkserver"
        assert worker["role"]["text"] == "multiprocessing worker (forkserver)"
        assert worker["ended"]["how"] in ("exit", "signal"), "a pool terminates its workers"


def test_a_process_still_running_at_the_report_is_not_called_killed(tmp_path):
    # The child outlives the program, its output away from the pipes that run() reads to their end.
    body = """
        import os
        import time

        ready, told = os.pipe()
        child = os.fork()
        if child == 0:
            quiet = os.open(os.devnull, os.O_WRONLY)
            os.dup2(quiet, 1)
            os.dup2(quiet, 2)
            os.write(told, b"x")
            time.sleep(60)
            os._exit(0)
        os.read(ready, 1)
        print(child)
    """
    process, processes = run(tmp_path, body, PYTHONWARNINGS="ignore::DeprecationWarning")
    child = int(process.stdout)
    try:
        (running,) = [p for p in processes if p["pid"] == child]
        assert running["ended"]["how"] == "running"
        assert running["diagnosis"]["killed"] is None
        traces = sorted(str(path) for path in tmp_path.glob("trace.*"))
        text = subprocess.run([needed("GPULEAK_TEST_REPORT"), *traces], capture_output=True, text=True, timeout=120)
        assert "still running when this report was made" in text.stdout
        assert "Killed:" not in text.stdout
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(child, signal.SIGKILL)
    # Once it is gone, no end record: killed.
    deadline = time.monotonic() + 30
    while maps_of(child):
        assert time.monotonic() < deadline
        time.sleep(0.05)
    report = subprocess.run(
        [needed("GPULEAK_TEST_REPORT"), "--format", "json", *traces], capture_output=True, text=True, timeout=120
    )
    (killed,) = [p for p in json.loads(report.stdout)["processes"] if p["pid"] == child]
    assert killed["ended"]["how"] == "killed"
    assert killed["diagnosis"]["killed"] is not None
    # On the machine that ran it, gpuleak can tell it is gone: it does not say it may still run.
    text = subprocess.run([needed("GPULEAK_TEST_REPORT"), *traces], capture_output=True, text=True, timeout=120)
    assert "killed: no exit record (SIGKILL, e.g. by the OOM killer) after" in text.stdout
    assert "still running" not in text.stdout


def test_a_fork_that_runs_another_program_leaves_nothing(tmp_path):
    # preexec_fn makes subprocess fork (not vfork) and exec in the child.
    body = """
        import subprocess
        subprocess.run(["true"], check=True)
        subprocess.run(["true"], check=True, preexec_fn=lambda: None)
        print("done")
    """
    process, processes = run(tmp_path, body)
    assert process.stdout == "done\n"
    assert [p["role"]["kind"] for p in processes] == ["program"]


def test_python_keeps_its_own_signal_handlers(tmp_path):
    # gpuleak's handlers for fatal signals wait for the interpreter to install its own first.
    body = """
        import os, signal, time
        print(signal.getsignal(signal.SIGINT) is signal.default_int_handler)
        print(signal.getsignal(signal.SIGTERM) is signal.SIG_DFL)
        try:
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(5)
        except KeyboardInterrupt:
            print("KeyboardInterrupt")
    """
    process, processes = run(tmp_path, body)
    assert process.stdout == "True\nTrue\nKeyboardInterrupt\n"
    assert processes[0]["ended"]["how"] == "exit"


def memory_cgroup_of_our_own(tmp_path):
    """A new memory cgroup (v2, else v1) below this process's, which the test may fill; skips where cgroups
    cannot be made (no delegation, not root)."""
    with open("/proc/self/cgroup") as cgroups:
        lines = [line.rstrip("\n").split(":", 2) for line in cgroups]
    for hierarchy, controllers, path in lines:
        if hierarchy == "0" and controllers == "":
            root, usage, limit, inactive, swap = (
                "/sys/fs/cgroup", "memory.current", "memory.max", "inactive_file", "memory.swap.max")
        elif "memory" in controllers.split(","):
            root, usage, limit, inactive, swap = (
                "/sys/fs/cgroup/memory", "memory.usage_in_bytes", "memory.limit_in_bytes", "total_inactive_file",
                "memory.memsw.limit_in_bytes")
        else:
            continue
        parent = root + path
        if not os.path.exists(os.path.join(parent, usage)):
            continue
        made = os.path.join(parent, "gpuleak-test-%d" % os.getpid())
        try:
            os.mkdir(made)
        except OSError:
            continue
        # A v2 cgroup whose parent does not delegate the memory controller has no limit to set.
        if not os.path.exists(os.path.join(made, limit)):
            os.rmdir(made)
            continue
        return made, usage, limit, inactive, swap
    pytest.skip("no memory cgroup can be made here")


def test_a_worker_killed_near_the_cgroups_limit_is_explained_with_the_limit(tmp_path):
    cgroup, usage, limit_file, inactive, swap_file = memory_cgroup_of_our_own(tmp_path)
    limit = 256 << 20
    try:
        with open(os.path.join(cgroup, limit_file), "w") as file:
            file.write(str(limit))
        # With swap the worker would swap rather than be killed: none for it (v2: 0; v1: memory and swap
        # together, no more than the memory).
        if os.path.exists(os.path.join(cgroup, swap_file)):
            with open(os.path.join(cgroup, swap_file), "w") as file:
                file.write("0" if swap_file == "memory.swap.max" else str(limit))
        # The worker fills the cgroup to 92 % of its limit (what the OOM killer weighs: usage less the
        # inactive page cache) and holds it; then it is killed with SIGKILL, as the OOM killer would. Not
        # by the OOM killer itself: this kernel kills a second process (the parent, at its next page)
        # while the first victim's memory is still being freed.
        body = """
            import multiprocessing
            import os
            import time

            CGROUP, USAGE, INACTIVE, LIMIT = os.environ["CGROUP"], os.environ["USAGE"], os.environ["INACTIVE"], int(os.environ["LIMIT"])

            def working_set():
                with open(os.path.join(CGROUP, USAGE)) as file:
                    used = int(file.read())
                with open(os.path.join(CGROUP, "memory.stat")) as file:
                    stat = dict(line.split() for line in file)
                return used - int(stat[INACTIVE])

            def grow(full):
                held = []
                while working_set() < 0.92 * LIMIT:
                    held.append(b"\\x01" * (2 << 20))
                full.set()
                time.sleep(600)

            if __name__ == "__main__":
                context = multiprocessing.get_context("fork")
                full = context.Event()
                worker = context.Process(target=grow, args=(full,))
                worker.start()
                full.wait()
                time.sleep(1.5)
                os.kill(worker.pid, 9)
                worker.join()
                print(worker.exitcode)
        """
        script = tmp_path / "script.py"
        script.write_text(textwrap.dedent(body), encoding="utf-8")
        env = dict(
            os.environ,
            LD_PRELOAD=needed("GPULEAK_TEST_LIBRARY"),
            GPULEAK_OUTPUT=str(tmp_path / "trace.%p"),
            CGROUP=cgroup,
            USAGE=usage,
            INACTIVE=inactive,
            LIMIT=str(limit),
            PYTHONWARNINGS="ignore::DeprecationWarning",
        )
        # The shell puts itself into the cgroup, then becomes the program.
        enter = 'echo $$ > "$0/cgroup.procs" && exec "$@"'
        process = subprocess.run(
            ["sh", "-c", enter, cgroup, sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=120
        )
        assert process.returncode == 0, process.stderr
        assert process.stdout == "-9\n", "the worker was killed"
        traces = sorted(str(path) for path in tmp_path.glob("trace.*"))
        report = subprocess.run(
            [needed("GPULEAK_TEST_REPORT"), "--format", "json", *traces], capture_output=True, text=True, timeout=120
        )
        assert report.returncode == 0, report.stderr
        report = json.loads(report.stdout)
        (worker,) = [p for p in report["processes"] if p["role"]["kind"] == "forked_worker"]
        assert worker["ended"]["how"] == "killed"
        assert worker["diagnosis"]["killed"] is not None
        assert worker["host"]["cgroup_limit_bytes"] == limit
        peak = report["run"]["memory_peak"]
        assert peak["cgroup"] is True and peak["limit_bytes"] == limit
        assert peak["used_bytes"] >= 0.9 * limit
        assert peak["largest_pid"] == worker["pid"]
        text = subprocess.run([needed("GPULEAK_TEST_REPORT"), *traces], capture_output=True, text=True, timeout=120)
        worker_text = text.stdout[text.stdout.index("process %d " % worker["pid"]):]
        assert "Memory limit:" in worker_text and "the run's memory cgroup held" in worker_text
        assert "Killed:" in worker_text
    finally:
        # Whatever a failure left in it goes first: a cgroup with processes cannot be removed.
        with open(os.path.join(cgroup, "cgroup.procs")) as procs:
            for pid in procs.read().split():
                with contextlib.suppress(ProcessLookupError):
                    os.kill(int(pid), signal.SIGKILL)
        deadline = time.monotonic() + 10
        while True:
            try:
                os.rmdir(cgroup)
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)
