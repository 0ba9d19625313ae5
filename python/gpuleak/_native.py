"""The C API of libgpuleak.so, reached through the process image it was preloaded into.

libgpuleak.so is never loaded from here: its functions are looked up once, at import, with
``ctypes.PyDLL(None)`` (``dlsym`` on the program's global scope, which holds every ``LD_PRELOAD``ed
library). When they are absent every function here returns at once after one check of a module global.

The functions are called through ``PyDLL``: they keep the GIL, which costs less than releasing and
taking it again for calls this short, and a marker is recorded before ``mark()`` returns, in the order
the Python code ran (the recorder never waits for the GIL, so holding it cannot deadlock).
"""

from __future__ import annotations

import ctypes
import os
import sys
from typing import Optional

# The C side copies at most this many bytes of a label.
MAX_LABEL_BYTES = 1023
# ... and of gpuleak_name_source's file, name and text.
MAX_FILE_BYTES = 4095
MAX_TEXT_BYTES = 65535


def _resolve():
    if not sys.platform.startswith("linux"):
        return None, None, None, None
    try:
        image = ctypes.PyDLL(None)
        mark_fn = image.gpuleak_mark
        active_fn = image.gpuleak_active
        path_fn = image.gpuleak_trace_path
        name_source_fn = image.gpuleak_name_source
    except (OSError, AttributeError):
        return None, None, None, None
    mark_fn.argtypes = [ctypes.c_char_p]
    mark_fn.restype = None
    active_fn.argtypes = []
    active_fn.restype = ctypes.c_int
    path_fn.argtypes = [ctypes.c_char_p, ctypes.c_size_t]
    path_fn.restype = ctypes.c_size_t
    name_source_fn.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p]
    name_source_fn.restype = None
    return mark_fn, active_fn, path_fn, name_source_fn


# None each when libgpuleak.so is not loaded in this process (or is one without gpuleak_name_source:
# the package then keeps away from it altogether).
_mark, _active, _trace_path, _name_source = _resolve()


def _resolve_later_functions():
    """gpuleak_retainers, gpuleak_why_moments and gpuleak_saved_tensor_hooks, which a library older than the
    package lacks (None each)."""
    if _mark is None:
        return None, None, None
    image = ctypes.PyDLL(None)
    try:
        functions = image.gpuleak_retainers, image.gpuleak_why_moments, image.gpuleak_saved_tensor_hooks
    except AttributeError:
        return None, None, None
    functions[0].argtypes = [ctypes.c_char_p, ctypes.c_char_p]
    functions[0].restype = None
    for function in functions[1:]:
        function.argtypes = []
        function.restype = ctypes.c_int
    return functions


_retainers, _why_moments, _saved_tensor_hooks = _resolve_later_functions()


def _resolve_cell_error():
    """gpuleak_cell_error, which a library older than the package lacks (None)."""
    if _mark is None:
        return None
    function = getattr(ctypes.PyDLL(None), "gpuleak_cell_error", None)
    if function is not None:
        function.argtypes = [ctypes.c_char_p]
        function.restype = None
    return function


_cell_error = _resolve_cell_error()


def cell_error(cell) -> None:
    """Records the exception IPython showed last as the one the notebook's cell `cell` ("cell [12]") ended
    with (gpuleak_cell_error): its type, message and frames. Call it under the GIL after the cell, only for a
    cell that raised. Without the library (or one without the function), it does nothing."""
    if _cell_error is not None:
        _cell_error(encode_label(cell))
# The C side reads a document of what held the memory up to this many bytes.
MAX_RETAINERS_BYTES = 16383
# gpuleak.h's GPULEAK_WHY_* bits, by the names GPULEAK_WHY gives them.
_WHY_MOMENTS = {"oom": 1, "phase": 2, "exit": 4}


def why_moments() -> frozenset:
    """The moments GPULEAK_WHY asks for, as the library read it: ``oom`` (before an out-of-memory error
    reaches the program), ``phase`` (at the end of each ``gpuleak.phase``) and ``exit`` (as the program ends);
    empty without the library."""
    if _why_moments is None:
        return frozenset()
    bits = _why_moments()
    return frozenset(name for name, bit in _WHY_MOMENTS.items() if bits & bit)


def saved_tensor_hooks_never_set() -> bool:
    """True where the library saw that PyTorch's saved-tensor hooks were never set in this process (so that
    reading a tensor autograd saved runs none of the program's code); False where they were, or it cannot
    tell."""
    return _saved_tensor_hooks is not None and _saved_tensor_hooks() == 0


def retainers(label, document: bytes) -> bool:
    """Records what keeps the device memory alive (gpuleak_retainers): `document` is gpuleak.why()'s JSON, as
    UTF-8. False when it could not: no library, one without the function, or a document over the C side's
    limit."""
    if _retainers is None or len(document) > MAX_RETAINERS_BYTES:
        return False
    _retainers(encode_label(label), document)
    return True


def loaded() -> bool:
    """True when libgpuleak.so is loaded in this process (whether or not it could open a trace)."""
    return _mark is not None


def encode_label(label) -> bytes:
    """The bytes handed to gpuleak_mark: UTF-8, cut at a character boundary to what the C side keeps."""
    if isinstance(label, (bytes, bytearray)):
        data = bytes(label)
    else:
        data = str(label).encode("utf-8", "backslashreplace")
        if len(data) > MAX_LABEL_BYTES:
            data = data[:MAX_LABEL_BYTES].decode("utf-8", "ignore").encode("utf-8")
    return data


def mark(label) -> None:
    """Records a marker with this label in the trace, at this moment.

    ``gpuleak-report`` groups growth by the intervals between markers and says between which markers
    leaked memory was allocated. ``label`` is any object (``str()`` is taken) or bytes; it is stored as
    UTF-8, up to 1023 bytes (longer labels are cut at a character boundary) and up to a NUL character.
    Thread-safe. Without libgpuleak.so loaded, it does nothing (the label is not even formatted).
    The first marker of a process that has not touched CUDA yet creates its trace file.
    """
    if _mark is None:
        return
    _mark(encode_label(label))


def _utf8(value, limit: int) -> bytes:
    data = os.fsencode(value) if isinstance(value, os.PathLike) else value
    if not isinstance(data, (bytes, bytearray)):
        data = str(data).encode("utf-8", "backslashreplace")
    data = bytes(data).split(b"\0", 1)[0]
    return data[:limit].decode("utf-8", "ignore").encode("utf-8") if len(data) > limit else data


def name_source(file, name, text) -> None:
    """Says that Python code compiled under the file name ``file`` is the source ``text``, called
    ``name`` in the report: a frame of that file then reads ``name, line N`` with the line's text.

    Made for code compiled from strings under file names that exist nowhere on disk, such as a
    notebook's cells (the IPython extension calls it for each cell: ``cell [12]``). Recorded at once, so
    call it before the code runs. A later call for the same file replaces the earlier one. ``file`` is
    kept up to 4095 bytes, ``name`` up to 1023 and ``text`` up to 65535 (UTF-8). Without libgpuleak.so
    loaded, it does nothing.
    """
    if _name_source is None:
        return
    _name_source(_utf8(file, MAX_FILE_BYTES), _utf8(name, MAX_LABEL_BYTES), _utf8(text, MAX_TEXT_BYTES))


def active() -> bool:
    """True when libgpuleak.so is loaded in this process and recording into a trace file.

    False without the library, or when it could not create its trace file (read-only directory, disk
    full). Asking starts the recording if nothing did yet, so a process that asks has a trace file.
    """
    if _active is None:
        return False
    return _active() != 0


def trace_path() -> Optional[str]:
    """The path of this process's trace file, as given to the library (relative to the working
    directory the process had when it created the file, if ``GPULEAK_OUTPUT`` was relative), or None
    when libgpuleak.so is not loaded or not recording. Asking starts the recording if nothing did yet.
    """
    if _trace_path is None:
        return None
    capacity = 4096
    while True:
        buffer = ctypes.create_string_buffer(capacity)
        length = _trace_path(buffer, capacity)
        if length == 0:
            return None
        if length < capacity:
            return os.fsdecode(buffer.value)
        capacity = length + 1


def library_path() -> Optional[str]:
    """The file libgpuleak.so was loaded from, read from /proc/self/maps; None when not loaded."""
    if _mark is None:
        return None
    address = ctypes.cast(_mark, ctypes.c_void_p).value or 0
    try:
        with open("/proc/self/maps", "rb") as maps:
            for line in maps:
                fields = line.split(None, 5)
                if len(fields) < 6:
                    continue
                start, _, end = fields[0].partition(b"-")
                if int(start, 16) <= address < int(end, 16):
                    path = fields[5].strip()
                    return os.fsdecode(path) if path.startswith(b"/") else None
    except (OSError, ValueError):
        pass
    return None
