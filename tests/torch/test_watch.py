"""gpuleak watch in a real terminal (tmux) on a PyTorch loop running under gpuleak run on the simulated
device: the line that grows appears, with its text, while the loop runs; once the loop is stopped, the
last frame says how it ended and what the trace found.

Environment: that of test_workloads.py.
"""

import os
import shutil
import signal
import subprocess
import time
import uuid

import pytest
from test_workloads import LAUNCHER, script_command
from test_workloads import pytestmark as workload_marks
from test_torch_adapter import adapter_cache  # noqa: F401 (a fixture)

pytestmark = workload_marks

LOOP = os.path.join(os.path.dirname(os.path.abspath(__file__)), "watch", "leak_loop.py")


def line_of(text):
    with open(LOOP) as script:
        return next(number for number, line in enumerate(script, 1) if line.strip() == text)


def wait_for(what, timeout):
    """what() until it is true, or None after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = what()
        if found:
            return found
        time.sleep(0.2)
    return None


def test_watch_in_a_terminal_shows_the_line_that_grows_while_the_loop_runs(tmp_path, adapter_cache):
    if shutil.which("tmux") is None:
        pytest.fail("tmux is missing: scripts/setup.sh installs it")
    command, environment = script_command(tmp_path, LOOP, adapter_cache, traced=True)
    loop = subprocess.Popen(command, env=environment, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    server = "gpuleak-watch-" + uuid.uuid4().hex[:8]
    tmux = ["tmux", "-L", server]
    try:
        run = tmp_path / "run"
        trace = wait_for(lambda: run.is_dir() and next(run.glob("gpuleak.*.trace"), None), 120)
        assert trace, "the loop's trace never appeared"
        pid = trace.name.split(".")[1]
        subprocess.run([*tmux, "new-session", "-d", "-s", "watch", "-x", "110", "-y", "40",
                        f"{LAUNCHER} watch --interval 0.5 {pid}"], check=True)
        subprocess.run([*tmux, "set-option", "-t", "watch", "remain-on-exit", "on"], check=True)

        def screen():
            return subprocess.run([*tmux, "capture-pane", "-p", "-t", "watch"], capture_output=True,
                                  text=True).stdout

        growing = f"leak_loop.py:{line_of('loss = model(batch).pow(2).mean()')}  loss = model(batch).pow(2).mean()"
        shown = wait_for(lambda: growing in screen() and screen(), 120)
        assert shown, screen()
        assert loop.poll() is None, "the loop ended before its growth was shown"
        assert f"gpuleak watch: pid {pid} python" in shown
        assert "running for" in shown
        assert "Growing now:" in shown
        assert "device 0 of 4.0 GiB: reserved" in shown

        loop.send_signal(signal.SIGINT)
        loop.wait(timeout=120)
        ended = wait_for(lambda: "leak: " in screen() and screen(), 60)
        assert ended, screen()
        assert "KeyboardInterrupt" in ended
        assert "Growing when it ended:" in ended
    finally:
        subprocess.run([*tmux, "kill-server"], capture_output=True)
        if loop.poll() is None:
            loop.kill()
            loop.wait()
