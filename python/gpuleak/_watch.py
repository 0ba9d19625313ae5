"""``%gpuleak watch`` in a notebook: what ``gpuleak watch`` shows of this kernel, redrawn in the output of
the cell that asked for it about once a second, while later cells run.

One ``gpuleak watch`` process follows the kernel's trace for the whole watch, so the kernel forks once
(a fork its trace records), not once a frame. A thread of the kernel reads its frames from a pipe, each
ended by a form feed's line, and updates the cell's display in place; the thread waits on the pipe and
takes the GIL only to update the display. ``%gpuleak watch stop`` ends the watch, and a new watch ends
the one before: one display is updated at a time.
"""

from __future__ import annotations

import atexit
import subprocess
import tempfile
import threading
from typing import Optional

from . import _report

INTERVAL_S = 1
FRAME_END = b"\f\n"
# What a watch that ended on request says under its last frame.
STOPPED = "gpuleak: the watch stopped (%gpuleak watch starts another)"
STOP_TIMEOUT_S = 10


def _plain(text: str) -> dict:
    return {"text/plain": text}


class _Watch:
    def __init__(self, process: subprocess.Popen, errors, handle):
        self.process = process
        self.errors = errors
        self.handle = handle
        self.stopping = False
        self.thread = threading.Thread(target=self._follow, name="gpuleak watch", daemon=True)

    def _follow(self) -> None:
        frame = b""
        shown = ""
        for line in self.process.stdout:
            if line != FRAME_END:
                frame += line
                continue
            shown = frame.decode("utf-8", "replace").rstrip("\n")
            self.handle.update(_plain(shown), raw=True)
            frame = b""
        status = self.process.wait()
        if self.stopping:
            ending = STOPPED
        elif status != 0:
            self.errors.seek(0)
            said = self.errors.read().decode("utf-8", "replace").strip().splitlines()
            ending = "gpuleak: the watch ended with status %d%s" % (status, (": " + said[-1]) if said else "")
        else:
            return
        self.handle.update(_plain(shown + "\n\n" + ending if shown else ending), raw=True)

    def stop(self) -> None:
        self.stopping = True
        if self.process.poll() is None:
            # gpuleak watch ends between two frames on SIGTERM, with status 0.
            self.process.terminate()
            try:
                self.process.wait(STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                self.process.kill()
        self.thread.join(STOP_TIMEOUT_S)
        self.errors.close()


_current: Optional[_Watch] = None


def start(trace: str) -> str:
    """Shows the watch of `trace` in this cell's output; "" or why it could not start."""
    from IPython.display import display

    stop()
    program, why = _report.find_program("gpuleak", "GPULEAK_LAUNCHER", "launcher")
    if program is None:
        return why
    # A file, not a pipe: what the watch says on stderr is read once it ended, and it must never wait on a
    # full pipe before then.
    errors = tempfile.TemporaryFile()
    try:
        process = subprocess.Popen(
            [program, "watch", "--interval", str(INTERVAL_S), trace],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=errors,
            env=_report.environment_without_preload(),
        )
    except OSError as error:
        errors.close()
        return "%s could not be run: %s" % (program, error)
    handle = display(_plain("gpuleak: watching this kernel's trace, %s" % trace), raw=True, display_id=True)
    global _current
    _current = _Watch(process, errors, handle)
    _current.thread.start()
    return ""


def stop() -> bool:
    """Ends the watch shown; whether there was one."""
    global _current
    watch, _current = _current, None
    if watch is None:
        return False
    watch.stop()
    return True


atexit.register(stop)
