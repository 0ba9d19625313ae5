"""The IPython extension of a gpuleak Jupyter kernel: cell markers, cell names, the previous kernel's death.

Loaded by the kernelspec that ``gpuleak kernel install`` writes (``--ext gpuleak``), or by hand with
``%load_ext gpuleak`` in a kernel started under libgpuleak.so. Before each cell runs it records, in the
trace:

- which file name IPython compiles the cell under (``/tmp/ipykernel_<pid>/<hash>.py``), with the cell's
  name and text (:func:`gpuleak.name_source`), so that the report shows ``cell [12], line 4`` and the
  line instead of that file name;
- the marker ``cell [12]``; after the cell, ``end of cell [12]``. The report groups growth by them, and
  a kernel that dies is said to have died in a cell or between two;
- for a cell that raised, after it, its exception (:func:`gpuleak._native.cell_error`): the report says
  which cell raised what, at which line, before its diagnosis.

Both are recorded before the cell's code runs, so a kernel killed during the cell (the OOM killer) has
them. When the kernel before this one died, ``gpuleak kernel run`` names its summary in
``GPULEAK_PREVIOUS_KERNEL_DEATH``: it is printed, on stderr, in the output of the first cell run.
"""

from __future__ import annotations

import os
import stat
import sys

from . import _magic, _native
from ._formatting import printable

PREVIOUS_DEATH_VARIABLE = "GPULEAK_PREVIOUS_KERNEL_DEATH"


def cell_name(number: int) -> str:
    return "cell [%d]" % number


# What gpuleak kernel run keeps its kernels' runs under (launcher/kernel_session.cpp).
def kernels_state_directory() -> str:
    home = os.environ.get("HOME") or "/"
    state = os.environ.get("XDG_STATE_HOME", "")
    # The XDG base directory specification: a relative path is to be ignored.
    if not os.path.isabs(state):
        state = os.path.join(home, ".local", "state")
    return os.path.join(state, "gpuleak", "kernels")


MAX_SUMMARY_BYTES = 1 << 20


def read_summary(path: str) -> str:
    """The summary at `path` if it is what gpuleak kernel run writes: a regular file under its state
    directory, opened without following a link there and without waiting on a FIFO; else ""."""
    root = os.path.abspath(kernels_state_directory())
    target = os.path.abspath(path)
    if target == root or os.path.commonpath([root, target]) != root:
        return ""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return ""
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return ""
        return os.read(fd, MAX_SUMMARY_BYTES).decode("utf-8", errors="replace")
    except OSError:
        return ""
    finally:
        os.close(fd)


def previous_death_banner() -> str:
    """The banner for the previous kernel's death, or "" when there is none to show."""
    path = os.environ.get(PREVIOUS_DEATH_VARIABLE)
    if not path:
        return ""
    text = read_summary(path).strip()
    if not text:
        return ""
    lines = ["gpuleak: the previous kernel of this notebook died."]
    lines += ["  " + printable(line) for line in text.splitlines()]
    lines.append("  (the full summary: %s)" % path)
    return "\n".join(lines) + "\n"


class CellRecorder:
    """IPython's pre_run_cell and post_run_cell callbacks for one shell."""

    def __init__(self, shell):
        self.shell = shell
        self.banner = previous_death_banner()

    def cell_number(self, info) -> int:
        # IPython counts the cell before pre_run_cell (InteractiveShell.run_cell_async): a cell that is
        # stored in the history has execution_count - 1, as its In[N] shows.
        count = self.shell.execution_count
        return count - 1 if getattr(info, "store_history", True) else count

    def pre_run_cell(self, info) -> None:
        number = self.cell_number(info)
        name = cell_name(number)
        raw = info.raw_cell or ""
        transformed = getattr(info, "transformed_cell", None)
        if transformed is None:
            transformed = self.shell.transform_cell(raw)
        # The compiler the shell runs the cell with names its file (ipykernel's: a hash of the raw text);
        # a cell run with its own __future__ environment (shell_futures False) gets IPython's default one.
        compiler = self.shell.compile if getattr(info, "shell_futures", True) else self.shell.compiler_class()
        get_code_name = getattr(compiler, "get_code_name", None)
        if get_code_name is not None:
            _native.name_source(get_code_name(raw, transformed, number), name, transformed)
        _native.mark(name)
        if self.banner:
            sys.stderr.write(self.banner)
            sys.stderr.flush()
            self.banner = ""

    def post_run_cell(self, result) -> None:
        number = getattr(result, "execution_count", None)
        if number is None:
            return
        # A cell that raised: its exception, which IPython showed and left as the last one shown, is
        # recorded with the cell's name before the cell's end.
        error = getattr(result, "error_in_exec", None) or getattr(result, "error_before_exec", None)
        if error is not None and error is shown_exception():
            _native.cell_error(cell_name(number))
        _native.mark("end of " + cell_name(number))


def shown_exception():
    """The exception IPython showed last (it sets sys.last_exc, before 3.12 sys.last_value)."""
    error = getattr(sys, "last_exc", None)
    return getattr(sys, "last_value", None) if error is None else error


_recorders = {}


def load_ipython_extension(shell) -> None:
    """Registers the cell callbacks and the %gpuleak magic; loading it again changes nothing."""
    if id(shell) in _recorders:
        return
    recorder = CellRecorder(shell)
    _recorders[id(shell)] = recorder
    shell.events.register("pre_run_cell", recorder.pre_run_cell)
    shell.events.register("post_run_cell", recorder.post_run_cell)
    shell.register_magic_function(_magic.gpuleak_magic, magic_kind="line", magic_name="gpuleak")
    if not _native.loaded():
        sys.stderr.write(
            "gpuleak: libgpuleak.so is not loaded in this kernel: nothing is recorded (start the kernel "
            "with the gpuleak kernelspec, `gpuleak kernel install`)\n"
        )


def unload_ipython_extension(shell) -> None:
    recorder = _recorders.pop(id(shell), None)
    if recorder is not None:
        shell.events.unregister("pre_run_cell", recorder.pre_run_cell)
        shell.events.unregister("post_run_cell", recorder.post_run_cell)
