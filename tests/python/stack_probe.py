"""The probe library (python_stack_probe.cpp) seen from Python, and what the test compares it with.

Imported by test_python_stacks.py and by the scripts it runs in fresh interpreters (start-up, atexit),
so it imports nothing beyond the standard library. GPULEAK_PYTHON_PROBE names the library.
"""

import ctypes
import os
import sys
import traceback
from typing import NamedTuple, Optional

NO_LINE = -(2**31)
BEFORE_FIRST_INSTRUCTION = 2**31 - 1
PYTHON_VERSION = sys.version_info.major << 8 | sys.version_info.minor
MAX_FRAMES = 4096


class ProbeFrame(ctypes.Structure):
    _fields_ = [
        ("code_object", ctypes.c_uint64),
        ("instruction_offset", ctypes.c_uint32),
        ("line", ctypes.c_int32),
        ("filename_size", ctypes.c_uint32),
        ("qualname_size", ctypes.c_uint32),
        ("described", ctypes.c_uint8),
        ("truncated", ctypes.c_uint8),
        ("loop_entry", ctypes.c_uint8),
        ("filename", ctypes.c_char * 1024),
        ("qualname", ctypes.c_char * 512),
    ]


class Frame(NamedTuple):
    filename: str
    qualname: str
    line: Optional[int]
    code_object: int


def load():
    library = ctypes.CDLL(os.environ["GPULEAK_PYTHON_PROBE"])
    library.gpuleak_probe_python_version.restype = ctypes.c_uint32
    library.gpuleak_probe_stack.argtypes = [ctypes.POINTER(ProbeFrame), ctypes.c_size_t]
    library.gpuleak_probe_stack.restype = ctypes.c_size_t
    library.gpuleak_probe_count.restype = ctypes.c_size_t
    library.gpuleak_probe_count_in_native_thread.restype = ctypes.c_size_t
    library.gpuleak_probe_report.argtypes = [ctypes.c_int]
    library.gpuleak_probe_line_at.argtypes = [
        ctypes.c_char_p,
        ctypes.c_size_t,
        ctypes.c_int32,
        ctypes.c_uint32,
        ctypes.c_uint32,
        ctypes.POINTER(ctypes.c_int32),
    ]
    library.gpuleak_probe_line_at.restype = ctypes.c_bool
    library.gpuleak_probe_remember_code.argtypes = [ctypes.c_uint64]
    library.gpuleak_probe_remember_code.restype = ctypes.c_bool
    library.gpuleak_probe_is_remembered_code.argtypes = [ctypes.c_uint64]
    library.gpuleak_probe_is_remembered_code.restype = ctypes.c_bool
    return library


probe = load()


def text(frame, field):
    size = getattr(frame, field + "_size")
    raw = ctypes.string_at(ctypes.addressof(frame) + getattr(ProbeFrame, field).offset, size)
    # File names that are not UTF-8 come back as their bytes, as os.fsencode gives them.
    return raw.decode("utf-8", "surrogateescape")


def resolved(frames, count):
    assert all(frame.described and not frame.truncated for frame in frames[:count])
    return [
        Frame(
            text(frame, "filename"),
            text(frame, "qualname"),
            None if frame.line == NO_LINE else frame.line,
            frame.code_object,
        )
        for frame in frames[:count]
    ]


def capture(limit=MAX_FRAMES):
    """(what the probe captured, traceback.extract_stack(), the frames' code objects innermost first),
    all taken at one call. The code objects are collected at once: a generator's frame loses its
    f_back when it yields."""
    frames = (ProbeFrame * limit)()
    count, summary, frame = probe.gpuleak_probe_stack(frames, limit), traceback.extract_stack(), sys._getframe()
    codes = []
    while frame is not None:
        codes.append(frame.f_code)
        frame = frame.f_back
    return resolved(frames, count), summary, codes


def loop_entries(limit=MAX_FRAMES):
    """(qualified name, loop entry) of each frame the walker captures here, innermost first: whether the
    frame is the first its evaluation loop ran."""
    frames = (ProbeFrame * limit)()
    count = probe.gpuleak_probe_stack(frames, limit)
    return [(text(frame, "qualname"), bool(frame.loop_entry)) for frame in frames[:count]]


def qualname_of(code):
    # 3.10 code objects have no qualified name: the walker gives co_name there.
    return getattr(code, "co_qualname", code.co_name)


def mismatch(captured, summary, codes, limit=None):
    """None when `captured` is `summary` (innermost last) frame by frame, else the first difference.

    With `limit`, the capture was capped there and must hold exactly the innermost `limit` frames.
    `codes` are the frames' code objects, innermost first: their identities and qualified names."""
    expected = summary[::-1]
    if limit is not None and len(expected) > limit:
        if len(captured) != limit:
            return f"{len(captured)} frames captured with a cap of {limit}, of {len(expected)}"
        expected = expected[:limit]
    if len(captured) != len(expected):
        return f"{len(captured)} frames captured, {len(expected)} expected:\n{captured}\n{expected}"
    for depth, (got, want, code) in enumerate(zip(captured, expected, codes)):
        wanted = Frame(want.filename, qualname_of(code), want.lineno, id(code))
        if got != wanted or want.name != code.co_name:
            return f"frame {depth} from the innermost: captured {got}, expected {wanted} ({want.name})"
    return None


def mismatch_here():
    return mismatch(*capture())
