"""The program's objects as the search reads them, without running any of the program's code: types told
by ``type()``, not ``__class__``; containers read with their base types' methods (``dict.items``,
``list.__len__``), never a subclass's; a class's attributes read past any metaclass; a key spelled with
``repr`` only when it is a str, a number or None. What kind of object each is (a function's frame, a
model's output, a cache, a class the program wrote), how one is reached from another, and in what words
a root is named."""

from __future__ import annotations

import keyword
import os
import sys
import sysconfig
import threading
import types
from typing import Optional

from .._formatting import article

# gpuleak's own directory: its frames and classes are not the program's.
_PACKAGE_DIRECTORY = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_CO_OPTIMIZED = 0x0001  # inspect.CO_OPTIMIZED, without importing inspect
# The items of a dict the holder is, from which it is a cache that gains a key each step.
MIN_CACHED = 3


def is_function(frame) -> bool:
    """A function's frame, whose locals are its own (a module's or a class body's are its namespace)."""
    return bool(frame.f_code.co_flags & _CO_OPTIMIZED)


def is_pullback(kind: type) -> bool:
    """A pullback of jax.vjp (JAX's VJP class), told by its type's name and module, never by reading it."""
    module = getattr(kind, "__module__", "") or ""
    return module.startswith("jax.") and kind.__name__ == "VJP"


def is_ours(frame) -> bool:
    return os.path.abspath(frame.f_code.co_filename).startswith(_PACKAGE_DIRECTORY + os.sep)


def key_text(key) -> str:
    """A dict key as an index: repr'd where repr is the language's own (no program code runs)."""
    if type(key) in (str, int, float, bool, bytes, type(None)):
        return "[%r]" % (key,)
    return "[<%s>]" % type(key).__name__


def is_attribute_name(name: str) -> bool:
    return name.isidentifier() and not keyword.iskeyword(name)


def _attributes(value) -> Optional[dict]:
    """An object's attribute dict, read without its class's code; None where it has none."""
    try:
        attributes = object.__getattribute__(value, "__dict__")
    except (AttributeError, TypeError):
        return None
    return attributes if issubclass(type(attributes), dict) else None


def is_attribute_dict(owner, value) -> bool:
    return issubclass(type(value), dict) and _attributes(owner) is value


# The keys by which a plain dict is a model's output; a transformers ModelOutput is told by its class.
_OUTPUT_KEYS = ("logits", "past_key_values", "hidden_states")


def is_cache(value) -> bool:
    kind = type(value)
    return issubclass(kind, dict) and not is_model_output(value) and dict.__len__(value) >= MIN_CACHED


def is_model_output(value) -> bool:
    kind = type(value)
    if not issubclass(kind, dict):
        return False
    if any(base.__name__ == "ModelOutput" and str(namespace(base).get("__module__", "")).startswith("transformers")
           for base in mro(kind)):
        return True
    return any(dict.__contains__(value, key) for key in _OUTPUT_KEYS)


# Where the interpreter's standard library lies: a class of a module there is not the program's.
_STANDARD_LIBRARY = tuple(
    sorted({os.path.realpath(sysconfig.get_paths()[name]) + os.sep for name in ("stdlib", "platstdlib")})
)


def written_by_program(kind: type) -> bool:
    module_name = namespace(kind).get("__module__")
    if module_name == "__main__":
        return True
    module = sys.modules.get(module_name) if type(module_name) is str else None
    path = dict.get(module.__dict__, "__file__") if issubclass(type(module), types.ModuleType) else None
    if type(path) is not str:
        return False
    path = os.path.realpath(path)
    parts = path.split(os.sep)
    return not (
        "site-packages" in parts
        or "dist-packages" in parts
        or path.startswith(_STANDARD_LIBRARY)
        or path.startswith(_PACKAGE_DIRECTORY + os.sep)
    )


def edge(parent, child) -> str:
    """How `child` is reached from `parent`, as Python would spell it: [3], ['key'], .name; "" for an
    object's attribute dict (its keys then read as attributes)."""
    kind = type(parent)
    attributes = _attributes(parent)
    if attributes is child:
        return ""
    if attributes is not None:
        # An object whose attributes the interpreter keeps inline (3.12+) gives them as its referents.
        for name, value in list(dict.items(attributes)):
            if value is child and type(name) is str and is_attribute_name(name):
                return "." + name
    if issubclass(kind, type) and issubclass(type(child), dict) and dict.keys(child) == namespace(parent).keys():
        return ""  # a class's namespace
    if issubclass(kind, dict):
        for key, value in list(dict.items(parent)):
            if value is child:
                return key_text(key)
        return ".keys()"
    if issubclass(kind, (list, tuple)):
        items = list.__iter__(parent) if issubclass(kind, list) else tuple.__iter__(parent)
        for position, value in enumerate(items):
            if value is child:
                return "[%d]" % position
    if issubclass(kind, types.FunctionType) and child is parent.__closure__:
        return ".__closure__"
    if issubclass(kind, types.CellType):
        return ".cell_contents"
    if issubclass(kind, types.TracebackType):
        return ".tb_frame" if child is parent.tb_frame else ".tb_next"
    if issubclass(kind, BaseException):
        for name in ("__traceback__", "__context__", "__cause__"):
            if BaseException.__getattribute__(parent, name) is child:
                return "." + name
    for base in mro(kind):
        for name, attribute in list(namespace(base).items()):
            if issubclass(type(attribute), types.MemberDescriptorType):
                try:
                    if attribute.__get__(parent) is child:
                        return "." + name
                except AttributeError:
                    continue
    return " -> %s" % kind.__name__


def mro(kind: type) -> tuple:
    return type.__getattribute__(kind, "__mro__")


def namespace(kind: type):
    """A class's attributes, read past any metaclass's __getattribute__."""
    return type.__getattribute__(kind, "__dict__")


def describe(value) -> str:
    """'a list with 60 items', 'a tensor', 'a Net': by its type, its size read with its base type's own
    __len__."""
    kind = type(value)
    for base in (list, dict, set, tuple):
        if issubclass(kind, base):
            size = base.__len__(value)
            return "%s with %d item%s" % (article(kind.__name__), size, "" if size == 1 else "s")
    if issubclass(kind, type):
        return "a class"
    return {"Tensor": "a tensor", "Parameter": "a parameter"}.get(kind.__name__) or article(kind.__name__)


def ipython_traceback():
    """The traceback IPython's shell keeps in its traceback printer (``InteractiveTB.tb``), or None; read
    from the objects' own dicts, so that no property runs."""
    getipython = sys.modules.get("IPython.core.getipython")
    try:
        shell = getipython.get_ipython() if getipython is not None else None
        if shell is None:
            return None
        printer = object.__getattribute__(shell, "__dict__").get("InteractiveTB")
        traceback = object.__getattribute__(printer, "__dict__").get("tb") if printer is not None else None
    except (AttributeError, TypeError):
        return None
    return traceback if issubclass(type(traceback), types.TracebackType) else None


def thread_name(thread_id: int) -> str:
    if thread_id == threading.main_thread().ident:
        return ""
    for thread in threading.enumerate():
        if thread.ident == thread_id:
            return " in thread %s" % thread.name
    return " in thread %d" % thread_id
