"""The "Python 3 (gpuleak)" Jupyter kernel, end to end, with the real ipykernel and jupyter_client.

A kernelspec installed by `gpuleak kernel install --user` into a temporary JUPYTER_DATA_DIR runs
ipykernel under `gpuleak kernel run`; its cells allocate on the simulated device through ctypes. The
report must name the cells and lines that hold memory; a kernel killed with SIGKILL (as the OOM killer
kills it) must leave a post-mortem report and summary, and the kernel Jupyter starts next must show it
once, in the first cell's output.

Environment (tests/jupyter/CMakeLists.txt): GPULEAK_TEST_LAUNCHER, GPULEAK_TEST_SIMDEVICE_DIR,
GPULEAK_TEST_REPORT.
"""

import glob
import html
import json
import os
import signal
import subprocess
import sys
import time

import pytest

jupyter_client = pytest.importorskip(
    "jupyter_client", reason="jupyter_client is not installed for this interpreter (scripts/setup.sh pins it)"
)
pytest.importorskip("ipykernel", reason="ipykernel is not installed for this interpreter (scripts/setup.sh pins it)")
from run_cells import add_output  # noqa: E402 - it imports jupyter_client

KERNEL = "gpuleak-test"
TIMEOUT = 60


def needed(name):
    value = os.environ.get(name)
    if not value:
        pytest.skip("%s is not set: run this test through ctest" % name)
    return value


@pytest.fixture
def jupyter_dirs(tmp_path, monkeypatch):
    """Jupyter's and gpuleak's directories, all under tmp_path, for this process and the kernels."""
    dirs = {
        "JUPYTER_DATA_DIR": tmp_path / "data",
        "JUPYTER_PATH": tmp_path / "path",
        "JUPYTER_RUNTIME_DIR": tmp_path / "runtime",
        "JUPYTER_CONFIG_DIR": tmp_path / "config",
        "XDG_STATE_HOME": tmp_path / "state",
        "IPYTHONDIR": tmp_path / "ipython",
    }
    for name, path in dirs.items():
        path.mkdir()
        monkeypatch.setenv(name, str(path))
    monkeypatch.setenv("GPULEAK_SIM_QUIET", "1")
    monkeypatch.setenv("GPULEAK_REPORT", needed("GPULEAK_TEST_REPORT"))
    monkeypatch.setenv("SIMDEVICE_DIR", needed("GPULEAK_TEST_SIMDEVICE_DIR"))
    return dirs


def gpuleak(*arguments):
    return subprocess.run(
        [needed("GPULEAK_TEST_LAUNCHER")] + list(arguments), capture_output=True, text=True, timeout=TIMEOUT
    )


def install(*extra):
    return gpuleak("kernel", "install", "--user", "--name", KERNEL, "--python", sys.executable, *extra)


def test_install_never_writes_through_a_planted_link(jupyter_dirs, tmp_path):
    # Another user of a shared prefix made kernel.json a link, dangling or to a file of the installer's.
    spec_dir = jupyter_dirs["JUPYTER_DATA_DIR"] / "kernels" / KERNEL
    spec_dir.mkdir(parents=True)
    target = tmp_path / "victim"
    (spec_dir / "kernel.json").symlink_to(target)
    installed = install("--replace")
    assert installed.returncode == 125
    assert installed.stderr.strip().endswith("kernel.json: a symbolic link")
    assert not target.exists()
    target.write_text("kept")
    assert install("--replace").returncode == 125
    assert target.read_text() == "kept"


def test_install_refuses_a_directory_anyone_may_write_to_and_takes_a_teams(jupyter_dirs):
    kernels = jupyter_dirs["JUPYTER_DATA_DIR"] / "kernels"
    spec_dir = kernels / KERNEL
    spec_dir.mkdir(parents=True)
    for directory in (kernels, spec_dir):
        # Open to everyone: anyone could replace kernel.json with a command of theirs.
        directory.chmod(0o777)
        refused = install("--replace")
        assert refused.returncode == 125
        assert refused.stderr == (
            "gpuleak: %s: anyone may write to this directory, and replace the kernel's kernel.json with a "
            "command of theirs; make it writable by its owner (and group) only\n" % directory
        )
        assert not (spec_dir / "kernel.json").exists()
        # A team's: its group installs kernels there.
        directory.chmod(0o775)
    installed = install("--replace")
    assert installed.returncode == 0, installed.stderr
    assert (spec_dir / "kernel.json").stat().st_mode & 0o777 == 0o644


def test_install_list_uninstall(jupyter_dirs, tmp_path):
    installed = install()
    assert installed.returncode == 0, installed.stderr
    spec_file = jupyter_dirs["JUPYTER_DATA_DIR"] / "kernels" / KERNEL / "kernel.json"
    spec = json.loads(spec_file.read_text())
    assert spec["display_name"] == "Python 3 (gpuleak)"
    assert spec["argv"][:4] == [os.path.realpath(needed("GPULEAK_TEST_LAUNCHER")), "kernel", "run", "--"]
    assert spec["argv"][4:] == [sys.executable, "-m", "ipykernel_launcher", "--ext", "gpuleak", "-f",
                                "{connection_file}"]
    # Jupyter itself finds it.
    specs = jupyter_client.kernelspec.KernelSpecManager().find_kernel_specs()
    assert specs[KERNEL] == str(spec_file.parent)

    again = install()
    assert again.returncode == 125
    assert again.stderr.strip().endswith("exists already; --replace replaces it")
    assert len(again.stderr.strip().splitlines()) == 1
    assert install("--replace", "--display-name", "GPU leaks").returncode == 0
    assert json.loads(spec_file.read_text())["display_name"] == "GPU leaks"

    missing = gpuleak("kernel", "install", "--user", "--python", str(tmp_path / "no-python"))
    assert missing.returncode == 125
    assert "no-python: not found" in missing.stderr
    # An interpreter without ipykernel: this one without its site-packages.
    bare = tmp_path / "bare-python"
    bare.write_text('#!/bin/sh\nexec %s -S "$@"\n' % sys.executable)
    bare.chmod(0o755)
    no_kernel = gpuleak("kernel", "install", "--user", "--name", "other", "--python", str(bare))
    assert no_kernel.returncode == 125
    assert "has no ipykernel; install it with" in no_kernel.stderr

    # A spec in a JUPYTER_PATH directory is listed too; a foreign kernelspec is not.
    other = jupyter_dirs["JUPYTER_PATH"] / "kernels" / "plain"
    other.mkdir(parents=True)
    (other / "kernel.json").write_text(json.dumps({"argv": ["python", "-m", "ipykernel"], "display_name": "x"}))
    listed = gpuleak("kernel", "list", "--python", sys.executable)
    assert listed.returncode == 0, listed.stderr
    assert KERNEL in listed.stdout and "plain" not in listed.stdout

    assert gpuleak("kernel", "uninstall", KERNEL).returncode == 0
    assert not spec_file.parent.exists()
    gone = gpuleak("kernel", "uninstall", KERNEL)
    assert gone.returncode == 125 and "no gpuleak kernelspec named" in gone.stderr


class Kernel:
    """A kernel of the installed spec, through jupyter_client, and what its cells print."""

    def __init__(self):
        # jupyter_client sends SIGTERM to a kernel that has not exited 2.5 s after a shutdown request (half
        # its default wait): on a loaded test machine a clean shutdown took longer once (CI, beside the
        # PyTorch tests), and a kernel shut down on request would read as killed.
        self.manager = jupyter_client.KernelManager(kernel_name=KERNEL, shutdown_wait_time=TIMEOUT)
        self.manager.start_kernel()
        self.connect()

    def connect(self):
        self.client = self.manager.client()
        self.client.start_channels()
        self.client.wait_for_ready(timeout=TIMEOUT)

    def run(self, code):
        """The text of the cell's stream and result outputs; fails on an error. The HTML the cell showed
        is kept in `pages`, the texts of the displays it updated in `updates`."""
        texts = []
        self.pages = []
        self.updates = []

        def keep(message):
            add_output(texts, message)
            if message["msg_type"] == "display_data" and "text/html" in message["content"]["data"]:
                self.pages.append(message["content"]["data"]["text/html"])
            if message["msg_type"] == "update_display_data":
                self.updates.append(message["content"]["data"].get("text/plain", ""))

        reply = self.client.execute_interactive(code, output_hook=keep, timeout=TIMEOUT)
        text = "".join(texts)
        assert reply["content"]["status"] == "ok", text
        return text

    def run_failing(self, code):
        """Runs a cell that must raise; the text of its outputs."""
        texts = []
        reply = self.client.execute_interactive(code, output_hook=lambda message: add_output(texts, message), timeout=TIMEOUT)
        assert reply["content"]["status"] == "error", "".join(texts)
        return "".join(texts)

    def wait_until_launcher_ended(self):
        deadline = time.monotonic() + TIMEOUT
        while self.manager.is_alive():
            assert time.monotonic() < deadline, "the launcher did not end after its kernel died"
            time.sleep(0.1)

    def restart(self):
        self.client.stop_channels()
        self.manager.restart_kernel(now=True)
        self.connect()

    def shutdown(self):
        self.client.stop_channels()
        self.manager.shutdown_kernel(now=False)


DEFINE_ALLOCATE = """\
import ctypes, os
cudart = ctypes.CDLL(os.path.join(os.environ["SIMDEVICE_DIR"], "libcudart.so.13"))
cudart.cudaMalloc.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_size_t]
def allocate(size):
    pointer = ctypes.c_void_p()
    assert cudart.cudaMalloc(ctypes.byref(pointer), size) == 0
    return pointer
print(os.getpid())
"""

LEAKING_CELL = """\
x = 1
held = []
held.append(allocate(3 << 20))
"""


def kernel_directory(dirs):
    # One kernel manager, one connection file, one directory, whatever its restarts.
    (directory,) = glob.glob(os.path.join(str(dirs["XDG_STATE_HOME"]), "gpuleak", "kernels", "*"))
    return directory


def run_directories(dirs):
    return sorted(glob.glob(os.path.join(kernel_directory(dirs), "gpuleak-*")))


def report_json(trace):
    completed = subprocess.run(
        [needed("GPULEAK_TEST_REPORT"), "--format", "json", trace], capture_output=True, text=True, timeout=TIMEOUT
    )
    assert completed.returncode == 0, completed.stderr
    return json.loads(completed.stdout)


def test_cells_named_death_reported_and_shown_once(jupyter_dirs, tmp_path, monkeypatch):
    assert install().returncode == 0
    # A value the kernel's launcher inherits is not its own: the first kernel has no death to show, even
    # where the value names a file in gpuleak's state directory, which the extension would show.
    secret = jupyter_dirs["XDG_STATE_HOME"] / "gpuleak" / "kernels" / ".inherited-death.txt"
    secret.parent.mkdir(parents=True)
    secret.write_text("not for the notebook\n")
    monkeypatch.setenv("GPULEAK_PREVIOUS_KERNEL_DEATH", str(secret))
    kernel = Kernel()
    try:
        first_output = kernel.run(DEFINE_ALLOCATE)  # cell [1]
        assert "not for the notebook" not in first_output and "previous kernel" not in first_output
        pid = int(first_output.strip())
        assert kernel.run(LEAKING_CELL) == ""  # cell [2]
        live = kernel.run("%gpuleak")  # cell [3]
        assert "reserved 3.0 MiB now" in live, live
        assert (
            "3.0 MiB in 1 allocation: cell [1], line 6 (`assert cudart.cudaMalloc(ctypes.byref(pointer), size) == 0`), "
            "from cell [2], line 3 (`held.append(allocate(3 << 20))`)"
        ) in live, live
        assert "+3.0 MiB reserved since cell [2] began" in live, live
        assert "held by the program now, by site:" in live, live

        (trace,) = glob.glob(os.path.join(run_directories(jupyter_dirs)[0], "gpuleak.%d.trace" % pid))
        (process,) = report_json(trace)["processes"]
        (site,) = process["leaks"]
        python = [frame for frame in site["frames"] if frame["python"]]
        assert python[0]["source_name"] == "cell [1]" and python[0]["function"] == "allocate"
        assert python[0]["line"] == 6 and python[0]["source_line"] == "assert cudart.cudaMalloc(ctypes.byref(pointer), size) == 0"
        assert python[1]["source_name"] == "cell [2]" and python[1]["line"] == 3
        assert python[1]["source_line"] == "held.append(allocate(3 << 20))"
        assert python[1]["file"].endswith(".py") and "ipykernel_" in python[1]["file"]
        labels = [marker["label"] for marker in process["markers"]]
        assert labels[:4] == ["cell [1]", "end of cell [1]", "cell [2]", "end of cell [2]"]
        text = kernel.run("%gpuleak report\n%gpuleak why")  # cell [4]
        assert "cell [2], line 3 in <module> (`held.append(allocate(3 << 20))`)" in text, text
        # The notebook shows the report's page instead of its text, in a sandboxed frame of its own.
        (page,) = kernel.pages
        assert page.startswith('<iframe srcdoc="&lt;!DOCTYPE html&gt;') and 'sandbox="allow-scripts"' in page
        assert "cell [2]" in html.unescape(page)
        # The cell's memory is held by a pointer, an int, which no search from the notebook's objects can
        # tell from any other int: said so, at the cell's line.
        why = text[text.index("gpuleak: what keeps this process's GPU memory alive") :]
        assert "3.0 MiB made at cell [1], line 6 (`assert cudart.cudaMalloc(ctypes.byref(pointer), size) == 0`): " in why, why
        assert "not reached from the program's objects" in why, why

        # Killed in the middle of cell [5], as the OOM killer kills: the kernel, not its launcher.
        kernel.client.execute("held.append(allocate(5 << 20))\nprint('allocated', flush=True)\nimport time\ntime.sleep(600)\n")
        deadline = time.monotonic() + TIMEOUT
        while True:
            message = kernel.client.get_iopub_msg(timeout=TIMEOUT)
            if message["msg_type"] == "stream" and "allocated" in message["content"]["text"]:
                break
            assert time.monotonic() < deadline
        os.kill(pid, signal.SIGKILL)
        kernel.wait_until_launcher_ended()

        (dead_run,) = run_directories(jupyter_dirs)
        summary = open(os.path.join(dead_run, "kernel-death.txt")).read()
        assert "the kernel was killed by SIGKILL" in summary and "OOM killer" in summary, summary
        assert "the kernel died while running cell [5]" in summary, summary
        assert "8.0 MiB" in summary, summary
        assert "full report: %s/report.txt" % dead_run in summary, summary
        assert os.path.exists(os.path.join(dead_run, "report.json"))

        kernel.restart()
        first = kernel.run("1 + 1")
        assert "gpuleak: the previous kernel of this notebook died." in first, first
        assert "while running cell [5]" in first and "report.txt" in first, first
        assert "previous kernel" not in kernel.run("2 + 2")

        # Restarted on request (a clean shutdown, exit status 0): no post-mortem, nothing to show.
        kernel.client.stop_channels()
        kernel.manager.restart_kernel(now=False)
        kernel.connect()
        assert "previous kernel" not in kernel.run("3 + 3")
        assert not os.path.exists(os.path.join(kernel_directory(jupyter_dirs), "previous-death"))
        assert [path for path in glob.glob(os.path.join(kernel_directory(jupyter_dirs), "*", "kernel-death.txt"))] == [
            os.path.join(dead_run, "kernel-death.txt")
        ]

        # Restarted on request while a cell runs in C code that holds the GIL (a long call into an extension):
        # the kernel cannot answer, and Jupyter ends it with SIGTERM to the launcher's process group. Asked
        # for: no post-mortem, nothing to show, and the trace says Jupyter ended it.
        busy_pid = int(kernel.run(DEFINE_ALLOCATE).strip())
        # Said by a file the cell makes itself: its printed output would wait for the GIL on the way out.
        busy = tmp_path / "busy"
        kernel.client.execute("held = [allocate(1 << 20)]\nopen(%r, 'w').close()\nsum(range(10**15))\n" % str(busy))
        deadline = time.monotonic() + TIMEOUT
        while not busy.exists():
            assert time.monotonic() < deadline
            time.sleep(0.05)
        kernel.client.stop_channels()
        kernel.manager.shutdown_wait_time = 4
        kernel.manager.restart_kernel(now=False)
        kernel.manager.shutdown_wait_time = TIMEOUT
        kernel.connect()
        assert "previous kernel" not in kernel.run("4 + 4")
        assert not os.path.exists(os.path.join(kernel_directory(jupyter_dirs), "previous-death"))
        (busy_trace,) = glob.glob(os.path.join(kernel_directory(jupyter_dirs), "*", "gpuleak.%d.trace" % busy_pid))
        assert not os.path.exists(os.path.join(os.path.dirname(busy_trace), "kernel-death.txt"))
        (busy,) = report_json(busy_trace)["processes"]
        assert busy["ended"]["how"] == "signal" and busy["ended"]["signal"] == signal.SIGTERM, busy["ended"]
        sender = busy["ended"]["sender"]
        assert sender["kind"] == "notebook" and sender["pid"] == os.getpid(), sender
        assert sender["written_by"] == "launcher"
        assert busy["ended"]["text"].startswith("killed by signal 15 (SIGTERM) after "), busy["ended"]
        assert "Jupyter (pid %d" % os.getpid() in busy["ended"]["text"], busy["ended"]
    finally:
        kernel.shutdown()


# A step's work: its batch made and freed, and one output kept in a list, as a leak keeps it.
GROWING_CELL = """\
import time
for step in range(20):
    batch = allocate(4 << 20)
    held.append(allocate(1 << 20))
    cudart.cudaFree(batch)
    time.sleep(0.3)
"""


def watch_processes(pid):
    """The gpuleak watch processes the kernel `pid` started."""
    found = []
    for entry in os.listdir("/proc"):
        try:
            with open("/proc/%s/stat" % entry) as stat:
                parent = int(stat.read().rsplit(")", 1)[1].split()[1])
            with open("/proc/%s/cmdline" % entry, "rb") as cmdline:
                arguments = cmdline.read().split(b"\0")
        except (OSError, ValueError, IndexError):
            continue
        if parent == pid and arguments[1:2] == [b"watch"]:
            found.append(int(entry))
    return found


def test_watch_redraws_the_kernels_memory_while_cells_run(jupyter_dirs):
    assert install().returncode == 0
    kernel = Kernel()
    try:
        pid = int(kernel.run(DEFINE_ALLOCATE).strip())  # cell [1]
        assert kernel.run("held = [allocate(3 << 20)]") == ""  # cell [2]
        started = kernel.run("%gpuleak watch")  # cell [3]
        assert started.startswith("gpuleak: watching this kernel's trace, "), started
        # A second watch ends the first: one display is redrawn, by one gpuleak watch.
        kernel.run("%gpuleak watch")  # cell [4]
        assert len(watch_processes(pid)) == 1
        # The frames are drawn while the cell runs, each from the trace as it is then.
        kernel.run(GROWING_CELL)  # cell [5]
        frames = [frame for frame in kernel.updates if frame.startswith("gpuleak watch: pid %d " % pid)]
        assert len(frames) >= 2, kernel.updates
        assert ", running for " in frames[0].splitlines()[0], frames[0]
        assert "device 0 of " in frames[-1], frames[-1]
        assert len(set(frames)) > 1, "the display was not redrawn with the growing memory: %r" % frames
        # The helper's line, and under it the cell's line that called it.
        growing = [frame for frame in frames if "from cell [5], line 4  held.append(allocate(1 << 20))" in frame]
        assert growing, frames[-1]
        assert (
            "Growing now:\n  cell [1], line 6 in allocate  assert cudart.cudaMalloc(ctypes.byref(pointer), size) == 0\n"
            in growing[-1]
        ), growing[-1]
        kernel.run("%gpuleak watch stop")  # cell [6]
        assert kernel.updates and kernel.updates[-1].endswith(
            "gpuleak: the watch stopped (%gpuleak watch starts another)"
        ), kernel.updates
        assert watch_processes(pid) == []
        assert kernel.run("%gpuleak watch stop") == "gpuleak: no watch to stop\n"
    finally:
        kernel.shutdown()


FAILING_CELL = """\
held = [allocate(2 << 20)]
raise ValueError("the batches are not what the model expects")
"""


def test_a_cell_that_raised_is_reported_with_its_cell_and_line(jupyter_dirs):
    assert install().returncode == 0
    kernel = Kernel()
    try:
        pid = int(kernel.run(DEFINE_ALLOCATE).strip())  # cell [1]
        kernel.run_failing(FAILING_CELL)  # cell [2]
        kernel.run_failing("held.append(allocate(1 << 20))\nraise KeyError('epoch')")  # cell [3]
        assert kernel.run("1 + 1").strip() == "2"  # the kernel goes on
        (trace,) = glob.glob(os.path.join(run_directories(jupyter_dirs)[0], "gpuleak.%d.trace" % pid))
        (process,) = report_json(trace)["processes"]
        assert process["error"] is None, "the kernel did not end"
        first, latest = process["cell_errors"]
        assert first["cell"] == "cell [2]" and first["type"] == "ValueError"
        assert first["message"] == "the batches are not what the model expects"
        assert first["text"] == "ValueError: the batches are not what the model expects, at cell [2], line 2"
        assert first["frames"][first["program_frame"]]["source_name"] == "cell [2]"
        assert latest["cell"] == "cell [3]" and latest["text"] == "KeyError: 'epoch', at cell [3], line 2"
        # The marker of the cell's end comes after its exception.
        labels = [marker["label"] for marker in process["markers"]]
        assert labels[:6] == ["cell [1]", "end of cell [1]", "cell [2]", "end of cell [2]", "cell [3]", "end of cell [3]"]
        text = subprocess.run([needed("GPULEAK_TEST_REPORT"), trace], capture_output=True, text=True, timeout=TIMEOUT)
        assert (
            "  raised     cell [3] raised KeyError: 'epoch', at cell [3], line 2 (1 earlier cell raised too)\n"
            in text.stdout
        ), text.stdout
        assert text.stdout.index("  raised     ") < text.stdout.index("Diagnosis:")
    finally:
        kernel.shutdown()
    # Shut down on request, the kernel ended with none of its cells' exceptions.
    (process,) = report_json(trace)["processes"]
    assert process["ended"]["how"] == "exit" and process["error"] is None
    assert [error["cell"] for error in process["cell_errors"]] == ["cell [2]", "cell [3]"]
