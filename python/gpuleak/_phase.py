"""``gpuleak.phase``: a block of the program marked in the trace, and with ``GPULEAK_WHY=phase`` what held
the memory as it ended."""

from __future__ import annotations

from contextlib import ContextDecorator

from . import _native, _why


class phase(ContextDecorator):
    """``with gpuleak.phase("epoch 3"):`` marks the start and the end of a block in the trace.

    Entering records the marker ``"epoch 3"``, leaving records ``"end of epoch 3"``; a block left by an
    exception records ``"end of epoch 3 (raised ValueError)"`` instead (the exception propagates).
    Also usable as a decorator, ``@gpuleak.phase("validation")``, marking each call. Phases may nest
    and the object may be reused. With ``GPULEAK_WHY=phase`` (see ``gpuleak._native.why_moments``),
    leaving also runs :func:`gpuleak.why` and records what keeps the device memory alive under the end's
    label. ``__enter__`` returns the phase object, whose ``label`` is the start label. Without libgpuleak.so
    loaded, it does nothing.
    """

    __slots__ = ("label",)

    def __init__(self, label):
        self.label = label

    def __enter__(self) -> "phase":
        _native.mark(self.label)
        return self

    def __exit__(self, exc_type, exc, tb) -> bool:
        if _native.loaded():
            label = self.label
            if isinstance(label, (bytes, bytearray)):
                label = label.decode("utf-8", "backslashreplace")
            label = str(label)
            end = "end of " + label if exc_type is None else "end of %s (raised %s)" % (label, exc_type.__name__)
            _native.mark(end)
            if "phase" in _native.why_moments():
                try:
                    _why.at_phase_end(end)
                except Exception:  # the block's own outcome is what leaves it, whatever the search met
                    pass
        return False

    def __repr__(self) -> str:
        return "gpuleak.phase(%r)" % (self.label,)
