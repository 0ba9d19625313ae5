"""``gpuleak.isolated(fn, *args, **kwargs)``: one call in a fresh process, with its own trace.

Frameworks that never give GPU memory back (caching allocators, compiled-kernel caches, leaked
contexts) are cured by running each unit of work (one trial of a hyperparameter search) in a process
that exits afterwards. ``isolated`` does that and hands back what the call returned, or raises what it
raised, while the child's trace and a summary of it stay available through ``gpuleak.last_isolated()``.

The child is started with multiprocessing's ``"spawn"`` method: a new interpreter (fork+exec), never a
bare fork, because CUDA state does not survive ``fork``. It inherits the environment, ``LD_PRELOAD``
included, so when this process is recorded the child records its own trace too. Consequences of
``spawn``: ``fn``, its arguments and its result travel by pickle (``fn`` must be importable by name: a
function defined at the top level of a module), and the child imports the main script again as
``__mp_main__``, so a script that calls ``isolated`` must keep its own work under
``if __name__ == "__main__":``.
"""

from __future__ import annotations

import multiprocessing
import multiprocessing.connection
import os
import pickle
import threading
import time
import traceback
from typing import Any, Callable, Optional

from multiprocessing.reduction import ForkingPickler

from . import _native, _phase, _report

__all__ = ["isolated", "last_isolated", "IsolatedRun", "IsolatedError", "ChildTraceback"]


class IsolatedError(RuntimeError):
    """The isolated call produced no result of its own: the child process died before returning
    (killed by a signal, such as SIGKILL from the OOM killer, or ``os._exit``, or a crash in native
    code), ``fn`` could not be loaded in the child, or what it returned or raised could not be sent
    back. ``run`` is the :class:`IsolatedRun` (also ``gpuleak.last_isolated()``), with the child's
    trace, which is complete up to the moment it died.
    """

    def __init__(self, message: str, run: Optional[IsolatedRun] = None):
        super().__init__(message)
        self.run = run

    def __reduce__(self):
        return (IsolatedError, (str(self),))


class ChildTraceback(Exception):
    """The traceback text of an exception raised in the isolated child, as it was printed there.

    Set as the ``__cause__`` of the exception that ``isolated`` re-raises, so that Python's traceback
    shows it ("The above exception was the direct cause of ..."); ``text`` holds it as a string.
    """

    def __init__(self, text: str):
        super().__init__(text)
        self.text = text

    def __str__(self) -> str:
        return '\n"""\n%s"""' % self.text


class IsolatedRun:
    """What one ``gpuleak.isolated`` call left behind; ``gpuleak.last_isolated()`` returns it.

    Attributes:

    - ``function``: the qualified name of the function that ran.
    - ``pid``: the child's process id.
    - ``exitcode``: its exit status as multiprocessing reports it (0; a negative number -N when it was
      killed by signal N).
    - ``returned``: True when ``fn`` returned (the call's result was handed back), False when it raised
      or the child died.
    - ``duration_s``: wall-clock seconds from starting the child to its exit.
    - ``trace_path``: the child's trace file (absolute), or None when the child was not recorded
      (libgpuleak.so not loaded).

    Computed on first access, by running ``gpuleak-report --format json`` on the child's trace (the
    report is looked for in ``GPULEAK_REPORT``, beside libgpuleak.so, then on ``PATH``):

    - ``report``: the whole parsed JSON document (``{"schema": ..., "processes": [...]}``), or None.
    - ``process``: the child's own entry of ``report["processes"]`` (``summary``, ``diagnosis``,
      ``leaks``, ``markers``, ...: the JSON report, docs/reference/json.md), or None.
    - ``summary``: one line of text: peak reserved and allocated, what was still reserved at the end,
      the diagnosis; or the trace path and why there is no report.
    - ``report_error``: why ``report`` is None ("" when there is one).

    ``str(run)`` is ``summary``.
    """

    def __init__(self, function: str):
        self.function = function
        self.pid: Optional[int] = None
        self.exitcode: Optional[int] = None
        self.returned = False
        self.duration_s = 0.0
        self.trace_path: Optional[str] = None
        self._lock = threading.Lock()
        self._analysed = False
        self._report: Optional[dict] = None
        self._report_error = ""

    def _analyse(self) -> None:
        with self._lock:
            if self._analysed:
                return
            if self.trace_path is None:
                self._report_error = "the child was not recorded (libgpuleak.so is not loaded)"
            else:
                self._report, self._report_error = _report.run_report(self.trace_path)
            self._analysed = True

    @property
    def report(self) -> Optional[dict]:
        self._analyse()
        return self._report

    @property
    def report_error(self) -> str:
        self._analyse()
        return self._report_error

    @property
    def process(self) -> Optional[dict]:
        return _report.process_entry(self.report, self.pid, self.trace_path)

    @property
    def summary(self) -> str:
        head = "%s in pid %s" % (self.function, self.pid)
        process = self.process
        if process is not None:
            return "%s: %s (trace %s)" % (head, _report.summary_line(process), self.trace_path)
        if self.trace_path is not None:
            return "%s: trace %s (no report: %s)" % (head, self.trace_path, self.report_error)
        return "%s: not recorded (libgpuleak.so is not loaded)" % head

    def __str__(self) -> str:
        return self.summary

    def __repr__(self) -> str:
        return "<gpuleak.IsolatedRun %s pid=%s exitcode=%s returned=%s trace=%r>" % (
            self.function,
            self.pid,
            self.exitcode,
            self.returned,
            self.trace_path,
        )


_last = threading.local()


def last_isolated() -> Optional[IsolatedRun]:
    """The :class:`IsolatedRun` of the latest ``gpuleak.isolated`` call made by this thread (also
    when it raised), or None before the first."""
    return getattr(_last, "run", None)


class _NotPicklable(Exception):
    pass


def _load_call(data: bytes):
    return pickle.loads(data)


class _Call:
    """fn, args and kwargs, pickled in two layers: the outer layer (multiprocessing's, while it spawns
    the child, so that its own objects such as queues may travel as arguments) carries the inner one as
    bytes, which the child unpickles inside ``_child_main``, where a failure can be reported back."""

    def __init__(self, call=None, data: Optional[bytes] = None):
        self.call = call
        self.data = data

    def __reduce__(self):
        try:
            data = bytes(ForkingPickler.dumps(self.call))
        except Exception as error:
            raise _NotPicklable(error) from error
        return (_Call, (None, data))


def _describe(fn) -> str:
    module = getattr(fn, "__module__", None)
    name = getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None)
    if name is None:
        return repr(fn)
    return "%s.%s" % (module, name) if module and module not in ("__main__", "__mp_main__") else name


def _send_exception(connection, error: BaseException, text: str) -> None:
    try:
        data = ForkingPickler.dumps(error)
        pickle.loads(data)  # an exception whose class cannot be rebuilt from its args is sent as text only
        data = bytes(data)
    except BaseException:
        data = None
    connection.send(("raised", text, type(error).__name__, str(error), data))


def _child_main(connection, call: _Call, name: str) -> None:
    """Runs in the child: loads the call, runs it between two markers, sends back what came of it."""
    try:
        try:
            fn, args, kwargs = _load_call(call.data)
        except BaseException as error:
            failure = IsolatedError(
                "gpuleak.isolated: the child process could not load %s: %s: %s. The child is a fresh "
                "interpreter that imports fn by module and name: define fn at the top level of an "
                "importable module (functions typed into an interactive session or notebook cannot be "
                "found), and keep a script's own work under if __name__ == \"__main__\":"
                % (name, type(error).__name__, error)
            )
            _send_exception(connection, failure, traceback.format_exc())
            return
        path = _native.trace_path()  # starts the recording: the trace exists even if the child dies
        connection.send(("started", os.path.abspath(path) if path else None))
        try:
            with _phase.phase("isolated " + name):
                result = fn(*args, **kwargs)
        except BaseException as error:
            # Without this frame: the traceback starts in fn, as if fn had been called directly.
            tb = error.__traceback__.tb_next if error.__traceback__ is not None else None
            _send_exception(connection, error, "".join(traceback.format_exception(type(error), error, tb)))
            return
        try:
            data = bytes(ForkingPickler.dumps(result))
        except Exception as error:
            failure = IsolatedError(
                "gpuleak.isolated: %s returned a %s, which cannot be pickled back to the caller: %s"
                % (name, type(result).__name__, error)
            )
            _send_exception(connection, failure, traceback.format_exc())
            return
        connection.send_bytes(b"R" + data)
    finally:
        connection.close()


def _preload_names_gpuleak(preload: str, library: Optional[str]) -> bool:
    wanted = os.path.basename(library) if library else "libgpuleak.so"
    for entry in preload.replace(":", " ").split():
        if os.path.basename(entry) == wanted or "gpuleak" in os.path.basename(entry):
            return True
    return False


_environment_lock = threading.Lock()


def _start(process) -> None:
    """process.start(), with libgpuleak.so put back into LD_PRELOAD for the duration when this process
    is recorded but its environment lost it (the child then records too)."""
    library = _native.library_path()
    preload = os.environ.get("LD_PRELOAD", "")
    if library is None or _preload_names_gpuleak(preload, library):
        process.start()
        return
    with _environment_lock:
        os.environ["LD_PRELOAD"] = library + (" " + preload if preload else "")
        try:
            process.start()
        finally:
            if preload:
                os.environ["LD_PRELOAD"] = preload
            else:
                del os.environ["LD_PRELOAD"]


def _receive(connection, process):
    """The child's messages until its outcome; None when it exited without one. Yields ("started",
    path) first when the child got that far."""
    while True:
        ready = multiprocessing.connection.wait([connection, process.sentinel])
        if connection not in ready and not connection.poll(0):
            return  # the child exited and nothing is left in the pipe
        try:
            message = connection.recv_bytes()
        except EOFError:
            return
        if message[:1] == b"R":
            yield ("returned", message[1:])
            return
        item = pickle.loads(message)
        yield item
        if item[0] != "started":
            return


def isolated(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """Runs ``fn(*args, **kwargs)`` in a fresh child process and returns its result.

    The child is a new interpreter started with multiprocessing's "spawn" method (never a bare fork:
    CUDA does not survive fork); everything it allocated, on the GPU too, is given back when it exits,
    whatever the framework's caches held. When this process runs under libgpuleak.so the child records
    a trace of its own (it inherits LD_PRELOAD); its markers "isolated NAME" and "end of isolated NAME"
    frame the call.

    If ``fn`` raises, the same exception (type, message, attributes) is raised here, with the child's
    traceback text attached as its ``__cause__`` (a :class:`ChildTraceback`). If the child dies before
    returning (a signal, the OOM killer, ``os._exit``), or the call cannot be sent to the child or its
    outcome back, :class:`IsolatedError` is raised. Either way ``gpuleak.last_isolated()`` then returns
    the :class:`IsolatedRun`: pid, exit status, trace path, and the report's summary of the child.

    ``fn``, ``args`` and ``kwargs`` are pickled to the child, and the result pickled back: ``fn`` must be
    importable by name (a function at the top level of a module, not a lambda, closure or local
    function); otherwise TypeError is raised here before any process starts. A script calling
    ``isolated`` must guard its own work with ``if __name__ == "__main__":``, because the child imports
    the main module again. Blocks until the child has exited. Nothing is printed to stdout.
    """
    name = _describe(fn)
    run = IsolatedRun(name)
    _last.run = run
    context = multiprocessing.get_context("spawn")
    receiver, sender = context.Pipe(duplex=False)
    process = context.Process(
        target=_child_main,
        args=(sender, _Call((fn, args, kwargs)), name),
        name="gpuleak.isolated(%s)" % name,
    )
    started = time.monotonic()
    try:
        try:
            _start(process)
        except _NotPicklable as error:
            cause = error.__cause__
            raise TypeError(
                "gpuleak.isolated: cannot send %s and its arguments to a child process: %s: %s. fn, args "
                "and kwargs are pickled: fn must be importable by name (a function defined at the top "
                "level of a module, not a lambda, a closure or a method of a local class) and every "
                "argument picklable." % (name, type(cause).__name__, cause)
            ) from cause
    finally:
        sender.close()
    run.pid = process.pid

    outcome = None
    try:
        try:
            for message in _receive(receiver, process):
                if message[0] == "started":
                    run.trace_path = message[1]
                else:
                    outcome = message
        except Exception as error:  # unpickling what the child sent failed here
            outcome = ("unreadable", error)
        process.join()
    except BaseException:
        # Interrupted while waiting (KeyboardInterrupt): the child is not left running.
        if process.is_alive():
            process.terminate()
        process.join()
        raise
    finally:
        receiver.close()
        run.exitcode = process.exitcode
        run.duration_s = time.monotonic() - started
        try:
            process.close()
        except (AttributeError, ValueError):
            pass

    if outcome is None:
        if run.exitcode is not None and run.exitcode < 0:
            import signal

            try:
                how = "was killed by %s" % signal.Signals(-run.exitcode).name
            except ValueError:
                how = "was killed by signal %d" % -run.exitcode
            if run.exitcode == -signal.SIGKILL:
                how += " (the kernel's OOM killer sends it when host memory runs out)"
        else:
            how = "exited with status %s" % run.exitcode
        raise IsolatedError(
            "gpuleak.isolated: the child process running %s (pid %s) %s before returning%s"
            % (name, run.pid, how, "; its trace: %s" % run.trace_path if run.trace_path else ""),
            run,
        )
    if outcome[0] == "returned":
        try:
            result = pickle.loads(outcome[1])
        except Exception as error:
            raise IsolatedError(
                "gpuleak.isolated: the result of %s could not be unpickled here: %s: %s"
                % (name, type(error).__name__, error),
                run,
            ) from error
        run.returned = True
        return result
    if outcome[0] == "unreadable":
        error = outcome[1]
        raise IsolatedError(
            "gpuleak.isolated: what %s sent back could not be unpickled here: %s: %s"
            % (name, type(error).__name__, error),
            run,
        ) from error
    _, text, type_name, message, data = outcome
    header = "Traceback of pid %s (the isolated child):\n" % run.pid
    exception = None
    if data is not None:
        try:
            exception = pickle.loads(data)
        except Exception:
            exception = None
    if not isinstance(exception, BaseException):
        exception = IsolatedError(
            "%s raised %s: %s (the exception could not be pickled back: an exception class whose __init__ "
            "takes other arguments than its args cannot be rebuilt by pickle)" % (name, type_name, message),
            run,
        )
    elif isinstance(exception, IsolatedError):
        exception.run = run
    raise exception from ChildTraceback(header + text)


for _public in (IsolatedError, ChildTraceback, IsolatedRun):
    _public.__module__ = "gpuleak"  # as users see them: gpuleak.IsolatedError, ...
del _public
