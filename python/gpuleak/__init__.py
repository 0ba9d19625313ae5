"""gpuleak from Python: markers in the trace, and process isolation with a trace per call.

gpuleak records the GPU memory a program allocates when ``libgpuleak.so`` is preloaded::

    LD_PRELOAD=/path/to/libgpuleak.so python train.py
    gpuleak-report gpuleak.4242.trace

This package talks to that library when it is loaded in the process, and does nothing (at the cost
of one check of a module global) when it is not, so a program can keep its calls unconditionally::

    import gpuleak

    for epoch in range(epochs):
        with gpuleak.phase(f"epoch {epoch}"):   # markers "epoch 3" ... "end of epoch 3"
            train_one_epoch()
    gpuleak.mark("evaluation")                  # a single marker

    gpuleak.name_source(file, "cell [3]", text)  # frames of `file` read "cell [3], line N"
    gpuleak.active()       # True when libgpuleak.so is loaded and recording
    gpuleak.trace_path()   # this process's trace file, or None

    print(gpuleak.why())   # what keeps the GPU memory alive: `losses`, a list in __main__, ...

    # One trial per fresh process: whatever the framework keeps cached dies with it.
    score = gpuleak.isolated(run_trial, learning_rate=1e-3)
    print(gpuleak.last_isolated().summary)    # the child's peak, what it left, the diagnosis

The library is found with ``ctypes.PyDLL(None)`` in the process's own image (it is never loaded from
here); see :mod:`gpuleak._native`. In Jupyter, ``%load_ext gpuleak`` (or the kernelspec of
``gpuleak kernel install``) names each cell in the trace and adds ``%gpuleak``; see :mod:`gpuleak._notebook`. :func:`isolated` uses multiprocessing's "spawn" start method; see
:mod:`gpuleak._isolated`. Nothing in this package prints to stdout.
"""

from ._isolated import ChildTraceback, IsolatedError, IsolatedRun, isolated, last_isolated
from ._native import active, mark, name_source, trace_path
from ._notebook import load_ipython_extension, unload_ipython_extension
from ._phase import phase
from ._why import Holder, Why, why

__version__ = "0.1.0"

__all__ = [
    "mark",
    "phase",
    "active",
    "trace_path",
    "name_source",
    "load_ipython_extension",
    "unload_ipython_extension",
    "isolated",
    "last_isolated",
    "IsolatedRun",
    "IsolatedError",
    "ChildTraceback",
    "why",
    "Why",
    "Holder",
]
