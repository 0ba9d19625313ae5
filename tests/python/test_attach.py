"""gpuleak attach on a Python program started without gpuleak, on each installed CPython: the leak found at
its line within --duration, a correct loop stable, the program's output and status its own, a second
attach after the first detached, gpuleak watch on an attached program, and each refusal in one line.

Environment (tests/python/CMakeLists.txt): GPULEAK_TEST_LAUNCHER, GPULEAK_TEST_SIMDEVICE_DIR,
GPULEAK_TEST_DEVICE_BUFFERS, GPULEAK_UNSUPPORTED_PYTHON.
"""

import json
import os
import signal
import subprocess
import sys
import time

import pytest

TARGET = os.path.join(os.path.dirname(os.path.abspath(__file__)), "attach_target.py")
TIMEOUT = 120
# Where what the loop keeps is made.
KEPT_LINE = "output = buffers.allocate(64 << 10)"


def needed(name):
    value = os.environ.get(name)
    if not value:
        pytest.skip("%s is not set: run this test through ctest" % name)
    return value


def environment(**more):
    simdevice = needed("GPULEAK_TEST_SIMDEVICE_DIR")
    env = dict(os.environ)
    env.pop("LD_PRELOAD", None)
    env.update(
        LD_LIBRARY_PATH=os.pathsep.join([simdevice, "/usr/local/cuda/lib64"]),
        GPULEAK_SIM_QUIET="1",
        GPULEAK_TEST_DEVICE_BUFFERS=needed("GPULEAK_TEST_DEVICE_BUFFERS"),
    )
    env.update(more)
    return env


class Program:
    """attach_target.py, started plainly, running until stop()."""

    def __init__(self, tmp_path, *arguments, python=sys.executable, command_prefix=()):
        self.stop_file = tmp_path / ("stop-%d" % time.monotonic_ns())
        self.process = subprocess.Popen(
            [*command_prefix, python, TARGET, str(self.stop_file), *arguments],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=environment(),
            text=True,
        )
        assert self.process.stdout.readline() == "started\n"

    @property
    def pid(self):
        return self.process.pid

    def stop(self):
        self.stop_file.touch()
        out, err = self.process.communicate(timeout=TIMEOUT)
        return self.process.returncode, "started\n" + out, err


def gpuleak(*arguments, **more):
    return subprocess.run(
        [needed("GPULEAK_TEST_LAUNCHER"), *arguments],
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        env=environment(**more),
    )


def attach(pid, directory, *options):
    return gpuleak("attach", str(pid), "-o", str(directory), *options)


def process_of(directory):
    with open(os.path.join(directory, "report.json")) as report:
        (process,) = json.load(report)["processes"]
    return process


def program_lines(site):
    return [frame.get("source_line") for frame in site["frames"] if frame.get("program")]


def test_a_leaking_loop_attached_to_shows_its_leak_and_goes_on_unchanged(tmp_path):
    program = Program(tmp_path, "--keep")
    attached = attach(program.pid, tmp_path / "run", "--duration", "2")
    assert attached.returncode == 0, attached.stderr
    assert "gpuleak: recording pid %d " % program.pid in attached.stderr
    assert "diagnosis: leak:" in attached.stderr, attached.stderr
    process = process_of(tmp_path / "run")
    assert process["attached"] and process["ended"]["how"] == "detached", process["ended"]
    assert process["diagnosis"]["kind"] == "leak", process["diagnosis"]
    growing = [site for site in process["leaks"] if site["growing"]]
    assert growing and KEPT_LINE in program_lines(growing[0]), growing
    with open(tmp_path / "run" / "report.txt") as text:
        assert "  attached   gpuleak attach began recording it while it ran" in text.read()
    # Detached, nothing more is recorded: the trace stays as it was while the program goes on.
    time.sleep(0.5)
    assert process_of(tmp_path / "run")["summary"]["events"] == process["summary"]["events"]
    # The program's output and status are what they are without gpuleak.
    status, out, err = program.stop()
    plain = Program(tmp_path, "--keep")
    assert (status, out, err) == plain.stop() == (3, "started\nstopped\n", "")
    assert not os.path.exists(tmp_path / "run" / "attach.log")


def test_a_correct_loop_attached_to_is_stable(tmp_path):
    program = Program(tmp_path)
    attached = attach(program.pid, tmp_path / "run", "--duration", "2")
    assert attached.returncode == 0, attached.stderr
    process = process_of(tmp_path / "run")
    assert process["diagnosis"]["kind"] == "stable", process["diagnosis"]
    assert process["summary"]["events"] > 100
    assert program.stop()[0] == 3


def test_a_program_that_touches_the_device_no_more_has_nothing_to_judge(tmp_path):
    program = Program(tmp_path, "--idle")
    attached = attach(program.pid, tmp_path / "run", "--duration", "1")
    assert attached.returncode == 0, attached.stderr
    diagnosis = process_of(tmp_path / "run")["diagnosis"]
    assert diagnosis["kind"] == "stable" and diagnosis["text"].startswith("Nothing to judge: "), diagnosis
    assert program.stop()[0] == 3


def test_attached_twice_in_turn_and_watched_while_attached(tmp_path):
    program = Program(tmp_path, "--keep")
    first = attach(program.pid, tmp_path / "first", "--duration", "1.5")
    assert first.returncode == 0, first.stderr
    # Until interrupted: while it records, gpuleak watch follows it, and another attach is refused.
    second = subprocess.Popen(
        [needed("GPULEAK_TEST_LAUNCHER"), "attach", str(program.pid), "-o", str(tmp_path / "second")],
        stderr=subprocess.PIPE,
        text=True,
        env=environment(),
    )
    assert second.stderr.readline().startswith("gpuleak: recording pid %d " % program.pid)
    time.sleep(1.5)
    watched = gpuleak("watch", "--once", str(program.pid))
    assert watched.returncode == 0, watched.stderr
    assert watched.stdout.startswith("gpuleak watch: pid %d " % program.pid), watched.stdout
    refused = attach(program.pid, tmp_path / "third")
    assert refused.returncode == 2
    assert refused.stderr == (
        "gpuleak: attach: pid %d: recorded already, into %s: follow it with `gpuleak watch %d`\n"
        % (program.pid, tmp_path / "second" / ("gpuleak.%d.trace" % program.pid), program.pid)
    )
    assert not os.path.exists(tmp_path / "third")
    second.send_signal(signal.SIGINT)
    rest = second.communicate(timeout=TIMEOUT)[1]
    assert second.returncode == 0, rest
    for run in ("first", "second"):
        process = process_of(tmp_path / run)
        assert process["diagnosis"]["kind"] == "leak", (run, process["diagnosis"])
        assert process["ended"]["how"] == "detached"
    assert program.stop()[:2] == (3, "started\nstopped\n")


def refusal(result, text):
    assert result.returncode == 2, result.stderr
    assert result.stderr.count("\n") == 1 and result.stderr.startswith("gpuleak: attach: "), result.stderr
    assert text in result.stderr, result.stderr


def test_refusals(tmp_path):
    gone = subprocess.Popen(["true"])
    gone.wait()
    refusal(attach(gone.pid, tmp_path / "run"), "pid %d: no such process" % gone.pid)
    sleeper = subprocess.Popen(["sleep", "60"])
    try:
        refusal(attach(sleeper.pid, tmp_path / "run"), "not a Python program")
    finally:
        sleeper.kill()
        sleeper.wait()
    program = Program(tmp_path)
    try:
        refusal(gpuleak("attach", str(program.pid), GPULEAK_GDB="/nonexistent/gdb"), "GPULEAK_GDB=/nonexistent/gdb")
        refusal(gpuleak("attach", str(program.pid), PATH="/nonexistent"), "gdb is not installed")
        # Another user's process: the user gpuleak attach runs as may not trace it.
        as_nobody = subprocess.run(
            ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", needed("GPULEAK_TEST_LAUNCHER"),
             "attach", str(program.pid), "-o", str(tmp_path / "nobody")],
            capture_output=True, text=True, timeout=TIMEOUT, env=environment(),
        )
        if os.geteuid() == 0:
            refusal(as_nobody, "another user's process (uid 0)")
    finally:
        assert program.stop()[:2] == (3, "started\nstopped\n")
    # One started under gpuleak run records already.
    recorded = Program(tmp_path, command_prefix=(needed("GPULEAK_TEST_LAUNCHER"), "run", "--quiet", "-o",
                                                 str(tmp_path / "recorded"), "--"))
    try:
        deadline = time.monotonic() + TIMEOUT
        children = []
        while not children and time.monotonic() < deadline:
            with open("/proc/%d/task/%d/children" % (recorded.pid, recorded.pid)) as listed:
                children = [int(pid) for pid in listed.read().split()]
            time.sleep(0.05)
        refusal(attach(children[0], tmp_path / "run"), "recorded already, into ")
    finally:
        recorded.stop()
    unsupported = os.environ.get("GPULEAK_UNSUPPORTED_PYTHON")
    if unsupported:
        old = Program(tmp_path, python=unsupported)
        try:
            refusal(attach(old.pid, tmp_path / "run"), ": gpuleak attach reads CPython 3.10 to 3.13")
        finally:
            assert old.stop()[0] == 3
    # Nothing was left behind by any refusal.
    assert not os.path.exists(tmp_path / "run") and not os.path.exists(tmp_path / "nobody")
