"""``gpuleak.why()``: what keeps the GPU memory of this process alive, in the program's own terms.

The largest sites of the process's own trace (``gpuleak-report --live-blocks`` on it) say which lines
allocated the memory that is live and where each block is (:mod:`gpuleak._why._sites`); a search from the
program's roots finds which of its objects hold those blocks, and through what (:mod:`gpuleak._why._search`,
which reads the program's objects with :mod:`gpuleak._why._objects` and their autograd graphs with
:mod:`gpuleak._why._graphs`, and tells its chains with :mod:`gpuleak._why._chains`). The answer (:mod:`gpuleak._why._answer`) is said in words
(:mod:`gpuleak._why._text`) and recorded in the trace (:mod:`gpuleak._why._record`), where gpuleak-report
shows it beside the sites it names.

Here: :func:`why`, its answer :class:`Why`, and the moments a search runs at without the program asking
(an out-of-memory error, the program's exit, a phase's end), which libgpuleak.so and ``gpuleak.phase``
call.
"""

from __future__ import annotations

import os
import threading

from .. import _native, _report
from . import _search, _sites
from ._answer import Answer, Graph, Holder, Site
from ._record import record
from ._text import answer_text

__all__ = ["why", "Why", "Holder", "Graph", "Site", "at_out_of_memory", "at_exit", "at_phase_end"]

DEFAULT_TIME_LIMIT_S = 2.0
# What a search the program did not ask for waits for gpuleak-report, at most.
IMPLICIT_REPORT_TIMEOUT_S = 30


class Why(Answer):
    """The answer of :func:`why`: its text is what ``print`` shows."""

    @property
    def text(self) -> str:
        return answer_text(self)

    def __str__(self) -> str:
        return self.text

    def _repr_pretty_(self, printer, cycle) -> None:
        printer.text(self.text)


def why(time_limit_s: float = DEFAULT_TIME_LIMIT_S) -> Why:
    """What keeps this process's GPU memory alive: for the tensors in the largest live sites of its
    trace, the roots of the program that hold them (a global, a local of a running function, the last
    exception's traceback), how much each holds and through what (a list, a dict, an autograd graph, a
    view's base). ``print(gpuleak.why())`` shows it; the result's fields hold the same as data. The answer
    is also recorded in the trace, where the report shows it beside the sites it names.

    Needs libgpuleak.so loaded (``gpuleak run``, the gpuleak Jupyter kernel) and gpuleak-report (see
    ``gpuleak._report``). Searches for at most ``time_limit_s`` seconds, then says what it did not
    reach.
    """
    result = _find(time_limit_s)
    record(result, "gpuleak.why()", "on_demand")
    return result


# A search the program did not ask for (at an out-of-memory error, at a phase's end) runs once at a time:
# one met meanwhile, in another thread, is left out; one met in the thread that searches (an error raised
# inside a search) too.
_implicit = threading.Lock()
_thread_state = threading.local()


def at_out_of_memory(device: int) -> None:
    """Called by libgpuleak.so before an out-of-memory error on `device` reaches the program (the PyTorch
    adapter's observer), under the GIL, where GPULEAK_WHY asks for it: records what held the memory then."""
    _implicitly(lambda result: record(result, "out of memory on device %d" % device, "out_of_memory", device))


def at_exit() -> None:
    """Registered with atexit by libgpuleak.so once the process holds device memory, where GPULEAK_WHY asks
    for it (the default): records what holds the memory as the program ends, before the interpreter
    finalizes."""
    _implicitly(lambda result: record(result, "the program's exit", "exit"))


def at_phase_end(label: str) -> None:
    """Called as a ``gpuleak.phase`` ends, with GPULEAK_WHY=phase: records what holds the memory then."""
    _implicitly(lambda result: record(result, label, "phase_end"))


def _implicitly(then) -> None:
    if getattr(_thread_state, "searching", False) or not _implicit.acquire(blocking=False):
        return
    try:
        then(_find(DEFAULT_TIME_LIMIT_S, implicit=True))
    finally:
        _implicit.release()


def _find(time_limit_s: float, implicit: bool = False) -> Why:
    """The answer; `implicit`: for a moment the program did not ask about (gpuleak-report gets
    IMPLICIT_REPORT_TIMEOUT_S, and the tensors autograd saved are not unpacked where unpacking could run
    the program's code)."""
    _thread_state.searching = True
    try:
        result = Why(pid=os.getpid(), trace=_native.trace_path())
        if result.trace is None:
            result.problem = "not recording: libgpuleak.so is not loaded in this process"
            return result
        blocks = _sites.read_sites(result, IMPLICIT_REPORT_TIMEOUT_S if implicit else _report.REPORT_TIMEOUT_S)
        if result.sites:
            _search.search(result, blocks, time_limit_s, implicit)
        return result
    finally:
        _thread_state.searching = False
