"""``gpuleak.why()``: what keeps the GPU memory of this process alive, in the program's own terms.

The largest sites of the process's own trace (``gpuleak-report --live-blocks`` on it) say which lines
allocated the memory that is live and where each block is. The search starts from the program's roots
(the globals of ``__main__``, which in a notebook hold its ``Out`` and ``_`` history; the locals of the
frames running in every thread; the last exception's traceback) and, when those do not reach everything,
the globals of every other module. It follows Python's references (``gc.get_referents``), a closure's
cells, a frame's locals, and what PyTorch keeps out of Python's sight: a tensor's autograd graph
(``grad_fn``, ``next_functions``, the tensors its nodes saved, a leaf's ``AccumulateGrad``), its
gradient and the base of a view. Breadth first, so that each tensor is reached by one of the shortest
chains; each tensor's storage is counted once, for the root that reached it first.

It is read-only: it calls no ``__getattr__`` or ``__eq__`` of the program's, reads dicts and lists with
their own types' methods, and keeps no object once it returns (the result holds only text and numbers).
It runs where it is called, under the GIL, with the cyclic garbage collector paused, and stops after a
time limit, saying what it did not search.
"""

from __future__ import annotations

import bisect
import gc
import os
import sys
import threading
import time
import types
from collections import deque
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple

from . import _magic, _native, _report

DEFAULT_TIME_LIMIT_S = 2.0
# The sites searched for: the report's largest that the program holds (not an allocator's segments).
SITES = 10
# How often the search looks at the clock, in objects.
CLOCK_EVERY = 512
_PACKAGE_DIRECTORY = os.path.dirname(os.path.abspath(__file__))


@dataclass
class Site:
    """A site of the trace whose live memory was searched for: where it was allocated."""

    where: str
    bytes: int
    count: int
    growing: bool
    purpose: str = ""  # what a library keeps it for, where its stack says so ("cuBLAS's workspace, ...")


@dataclass
class Holder:
    """A root of the program and what it holds of the sites' memory, through the chains found."""

    root: str  # "`losses`, a list in __main__ with 60 items"
    kind: str  # "global", "local", "traceback", "module"
    bytes: int = 0
    tensors: int = 0
    sites: List[int] = field(default_factory=list)  # indices into Why.sites
    path: str = ""  # one of the chains, as an expression: "losses[59].grad_fn.next_functions[0][0]"
    # What the chains went through, as facts: "autograd graph", "view", "parameter", "optimizer state",
    # "gradient", "closure", "traceback".
    through: List[str] = field(default_factory=list)
    owner: str = ""  # for PyTorch's own holders: "Net", "Adam"
    models: int = 0  # the modules whose parameters it holds, where it is not a module itself


@dataclass
class Why:
    """The answer of :func:`why`: its text is what ``print`` shows."""

    pid: int
    trace: Optional[str]
    sites: List[Site] = field(default_factory=list)
    holders: List[Holder] = field(default_factory=list)
    # Of the sites' live memory, what no chain reached: (site index, bytes), most first.
    unreached: List[Tuple[int, int]] = field(default_factory=list)
    objects_searched: int = 0
    seconds: float = 0.0
    stopped: bool = False  # the time limit ended the search
    problem: Optional[str] = None  # why there is no answer

    @property
    def text(self) -> str:
        return _text(self)

    def __str__(self) -> str:
        return self.text

    def _repr_pretty_(self, printer, cycle) -> None:
        printer.text(self.text)


def why(time_limit_s: float = DEFAULT_TIME_LIMIT_S) -> Why:
    """What keeps this process's GPU memory alive: for the tensors in the largest live sites of its
    trace, the roots of the program that hold them (a global, a local of a running function, the last
    exception's traceback), how much each holds and through what (a list, a dict, an autograd graph, a
    view's base). ``print(gpuleak.why())`` shows it; the result's fields hold the same as data.

    Needs libgpuleak.so loaded (``gpuleak run``, the gpuleak Jupyter kernel) and gpuleak-report (see
    :mod:`gpuleak._report`). Searches for at most ``time_limit_s`` seconds, then says what it did not
    reach.
    """
    result = Why(pid=os.getpid(), trace=_native.trace_path())
    if result.trace is None:
        result.problem = "not recording: libgpuleak.so is not loaded in this process"
        return result
    document, problem = _report.run_report(result.trace, ["--live-blocks", "--top", str(SITES * 2)])
    process = _report.process_entry(document, result.pid, result.trace)
    if process is None:
        result.problem = problem or "the report has no entry for this process"
        return result
    blocks = _BlockIndex()
    for site in process.get("leaks") or []:
        if site.get("segments") or len(result.sites) >= SITES:
            continue
        blocks.add(len(result.sites), site.get("blocks") or [])
        result.sites.append(
            Site(
                _site_where(site),
                site.get("bytes") or 0,
                site.get("count") or 0,
                bool(site.get("growing")),
                site.get("purpose") or "",
            )
        )
    if not result.sites:
        return result
    started = time.monotonic()
    collecting = gc.isenabled()
    gc.disable()
    try:
        _Search(blocks, result, started + time_limit_s).run()
    except Exception as error:  # noqa: BLE001 - the program asked a question; it must go on whatever the answer
        result.problem = "the search failed: %s: %s" % (type(error).__name__, error)
    finally:
        if collecting:
            gc.enable()
    result.seconds = time.monotonic() - started
    return result


def _site_where(site: dict) -> str:
    """The site as the report names it: a notebook cell's line with its text, else the report's words."""
    python = [frame for frame in site.get("frames") or [] if frame.get("python")]
    cells = [frame for frame in python if frame.get("source_name")]
    return _magic.frame_text(cells[0]) if cells else site.get("where") or "an unknown site"


class _BlockIndex:
    """The sites' live blocks by address: which site's block an address lies in."""

    def __init__(self):
        self._starts: List[int] = []
        self._entries: List[Tuple[int, int, int]] = []  # (start, end, site)
        self.sizes: Dict[int, int] = {}  # by block start

    def add(self, site: int, blocks) -> None:
        for address, size in blocks:
            self._entries.append((address, address + size, site))
            self.sizes[address] = size
        self._entries.sort()
        self._starts = [entry[0] for entry in self._entries]

    def site_of(self, address: int) -> Optional[Tuple[int, int]]:
        """(site, block start) of the block holding `address`, or None."""
        index = bisect.bisect_right(self._starts, address) - 1
        if index >= 0:
            start, end, site = self._entries[index]
            if address < end:
                return site, start
        return None


# One step of a chain: the object reached, the index of the step it was reached from (-1 at a root),
# how it was reached (an edge's text, "" to be worked out from the two objects), and the root's index.
_Step = Tuple[object, int, str, int]

# What the walk does with an object, by its type.
_FOLLOW, _TENSOR, _NODE, _FRAME, _LEAVE, _ARRAY = range(6)
# Objects that hold no reference that could lead to a tensor.
_ATOMIC = frozenset(
    {
        str,
        bytes,
        int,
        float,
        complex,
        bool,
        type(None),
        types.CodeType,
        types.BuiltinFunctionType,
        types.WrapperDescriptorType,
        types.MethodWrapperType,
        types.MethodDescriptorType,
        types.ClassMethodDescriptorType,
        types.GetSetDescriptorType,
        types.MemberDescriptorType,
        types.ModuleType,
    }
)


@dataclass
class _Found:
    """A storage in a site's block, and the first chain that reached it."""

    root: int
    site: int
    step: int = -1  # in the walk's steps; -1 for a holder of PyTorch's own, named up front
    path: str = ""
    through: List[str] = field(default_factory=list)
    owner: str = ""


class _Search:
    def __init__(self, blocks: _BlockIndex, result: Why, deadline: float):
        self.blocks = blocks
        self.result = result
        self.deadline = deadline
        self.torch = sys.modules.get("torch")
        self.steps: List[_Step] = []
        self.seen = set()
        self.queue: deque = deque()
        self.roots: List[Tuple[str, str]] = []  # (description, kind)
        self.found: Dict[int, _Found] = {}  # by block start
        self.kinds: Dict[type, int] = {}
        self.module_dicts = set()

    # The roots, the program's first.

    def program_roots(self) -> None:
        main = sys.modules.get("__main__")
        if main is not None:
            for name, value in list(dict.items(main.__dict__)):
                if not name.startswith("__"):
                    self.root(value, "`%s`, %s in __main__" % (name, _describe(value)), "global", name)
        for thread_id, frame in sys._current_frames().items():
            thread = _thread_name(thread_id)
            while frame is not None:
                if not _is_ours(frame) and frame.f_locals is not frame.f_globals:
                    where = "%s() at %s:%d%s" % (
                        frame.f_code.co_name,
                        os.path.basename(frame.f_code.co_filename),
                        frame.f_lineno,
                        thread,
                    )
                    for name, value in list(dict.items(dict(frame.f_locals))):
                        self.root(value, "`%s`, %s, a local of %s" % (name, _describe(value), where), "local", name)
                frame = frame.f_back
        for name in ("last_exc", "last_value", "last_traceback"):
            value = getattr(sys, name, None)
            if value is not None:
                self.root(
                    value,
                    "the last exception's traceback (sys.%s), which keeps the locals of every frame it went "
                    "through" % name,
                    "traceback",
                    "sys." + name,
                )

    def module_roots(self) -> None:
        for module_name, module in list(sys.modules.items()):
            if (
                not isinstance(module, types.ModuleType)
                or module_name == "__main__"
                or module_name.split(".")[0] == "gpuleak"
            ):
                continue
            for name, value in list(dict.items(module.__dict__)):
                if not name.startswith("__"):
                    self.root(value, "`%s.%s`, %s" % (module_name, name, _describe(value)), "module", name)

    def root(self, value, description: str, kind: str, path: str) -> None:
        if id(value) in self.seen or type(value) in _ATOMIC:
            return
        self.seen.add(id(value))
        self.roots.append((description, kind))
        root = len(self.roots) - 1
        self.steps.append((value, -1, path, root))
        self.queue.append(len(self.steps) - 1)
        self.name_torch_holders(value, root, path)

    def name_torch_holders(self, value, root: int, path: str) -> None:
        """A model's parameters, buffers and gradients, and an optimizer's state, are PyTorch's own holders:
        named so, whatever other chain reaches them first (an optimizer's state is keyed by parameters)."""
        torch = self.torch
        if torch is None:
            return
        if isinstance(value, torch.nn.Module):
            owner = type(value).__name__
            for name, parameter in value.named_parameters():
                self.name_tensor(parameter, root, "%s.%s" % (path, name), "parameter", owner)
                if parameter.grad is not None:
                    self.name_tensor(parameter.grad, root, "%s.%s.grad" % (path, name), "gradient", owner)
            for name, buffer in value.named_buffers():
                self.name_tensor(buffer, root, "%s.%s" % (path, name), "buffer", owner)
        elif isinstance(value, torch.optim.Optimizer):
            owner = type(value).__name__
            for number, state in enumerate(dict.values(value.state)):
                for name, tensor in dict.items(state):
                    if isinstance(tensor, torch.Tensor):
                        self.name_tensor(
                            tensor, root, "%s.state[<parameter %d>][%r]" % (path, number, name), "optimizer state", owner
                        )

    def name_tensor(self, tensor, root: int, path: str, fact: str, owner: str) -> None:
        placed = self.place(tensor)
        if placed is not None and placed[1] not in self.found:
            self.found[placed[1]] = _Found(root, placed[0], path=path, through=[fact], owner=owner)

    # The walk.

    def run(self) -> None:
        for module in list(sys.modules.values()):
            if isinstance(module, types.ModuleType):
                self.module_dicts.add(id(module.__dict__))
        self.seen.update(id(value) for value in (self, self.steps, self.queue, self.seen, self.found, self.result))
        self.program_roots()
        stopped = self.walk()
        if not stopped and len(self.found) < len(self.blocks.sizes):
            self.module_roots()
            stopped = self.walk()
        self.result.stopped = stopped
        self.result.objects_searched = len(self.steps)
        self.summarize()
        self.steps.clear()
        self.queue.clear()

    def walk(self) -> bool:
        """True when the time limit stopped it."""
        steps, queue, seen, kinds = self.steps, self.queue, self.seen, self.kinds
        get_referents, monotonic, deadline = gc.get_referents, time.monotonic, self.deadline
        visited = 0
        while queue:
            visited += 1
            if visited % CLOCK_EVERY == 0 and monotonic() > deadline:
                return True
            index = queue.popleft()
            value, _, _, root = steps[index]
            kind = kinds.get(type(value))
            if kind is None:
                kind = kinds[type(value)] = self.kind_of(value)
            if kind == _FOLLOW:
                if id(value) in self.module_dicts:
                    continue
                for child in get_referents(value):
                    if id(child) not in seen and type(child) not in _ATOMIC:
                        seen.add(id(child))
                        steps.append((child, index, "", root))
                        queue.append(len(steps) - 1)
                continue
            if kind == _LEAVE:
                continue
            for child, edge in self.special_children(value, kind, index):
                if id(child) not in seen and type(child) not in _ATOMIC:
                    seen.add(id(child))
                    steps.append((child, index, edge, root))
                    queue.append(len(steps) - 1)
        return False

    def kind_of(self, value) -> int:
        torch = self.torch
        if torch is not None:
            if isinstance(value, torch.Tensor):
                return _TENSOR
            # Node's subclass hook takes in every node class of the C++ autograd engine.
            if isinstance(value, torch.autograd.graph.Node):
                return _NODE
        if isinstance(value, types.FrameType):
            return _FRAME
        # Another library's device array (CuPy's, Numba's): its class says where its data is.
        if isinstance(getattr(type(value), "__cuda_array_interface__", None), property):
            return _ARRAY
        return _FOLLOW

    def special_children(self, value, kind: int, index: int):
        if kind == _TENSOR:
            placed = self.place(value)
            if placed is not None and placed[1] not in self.found:
                self.found[placed[1]] = _Found(self.steps[index][3], placed[0], step=index)
            for child in gc.get_referents(value):
                yield child, ""
            for name in ("grad_fn", "grad", "_base"):
                try:
                    child = getattr(value, name)
                except (RuntimeError, AttributeError):
                    continue
                if child is not None:
                    yield child, "." + name
        elif kind == _ARRAY:
            try:
                placed = self.blocks.site_of(value.__cuda_array_interface__["data"][0])
            except (AttributeError, KeyError, TypeError, ValueError, RuntimeError):
                placed = None
            if placed is not None and placed[1] not in self.found:
                self.found[placed[1]] = _Found(self.steps[index][3], placed[0], step=index)
            for child in gc.get_referents(value):
                yield child, ""
        elif kind == _NODE:
            yield from self.graph_children(value)
        elif kind == _FRAME and not _is_ours(value):
            for name, local in list(dict.items(dict(value.f_locals))):
                yield local, "<local %s>" % name

    def place(self, tensor) -> Optional[Tuple[int, int]]:
        """(site, block start) of the block a CUDA tensor's storage starts in, or None."""
        try:
            if tensor.device.type != "cuda":
                return None
            return self.blocks.site_of(tensor.untyped_storage().data_ptr())
        except (RuntimeError, TypeError, NotImplementedError):
            return None

    def graph_children(self, node):
        try:
            for position, (child, _) in enumerate(node.next_functions):
                if child is not None:
                    yield child, ".next_functions[%d][0]" % position
        except (RuntimeError, TypeError, ValueError):
            pass
        for name in dir(node):
            if not (name.startswith("_saved_") or name == "variable"):
                continue
            try:
                saved = getattr(node, name)
            except (RuntimeError, AttributeError):
                continue
            values = saved if isinstance(saved, (tuple, list)) else (saved,)
            for position, value in enumerate(values):
                if isinstance(value, self.torch.Tensor):
                    suffix = "[%d]" % position if values is saved else ""
                    yield value, ".%s%s" % (name, suffix)

    # The answer.

    def summarize(self) -> None:
        by_root: Dict[int, Holder] = {}
        sizes = self.blocks.sizes
        largest: Dict[int, int] = {}  # by root: the most bytes one storage of it has
        models: Dict[int, set] = {}  # by root: the modules whose parameters it holds
        for start, found in self.found.items():
            if found.step < 0:
                path, through, owner, module = found.path, found.through, found.owner, None
            else:
                path, through, owner, module = self.chain(found.step)
            holder = by_root.get(found.root)
            if holder is None:
                description, kind = self.roots[found.root]
                holder = by_root[found.root] = Holder(root=description, kind=kind, owner=owner)
            if module is not None:
                models.setdefault(found.root, set()).add(module)
            # The chain shown is that of its largest storage.
            if sizes[start] > largest.get(found.root, -1):
                largest[found.root] = sizes[start]
                holder.path = path
            for fact in through:
                _add(holder.through, fact)
            holder.bytes += sizes[start]
            holder.tensors += 1
            if found.site not in holder.sites:
                holder.sites.append(found.site)
        for root, held in models.items():
            by_root[root].models = len(held)
        self.result.holders = sorted(by_root.values(), key=lambda holder: -holder.bytes)
        unreached: Dict[int, int] = {}
        for start, size in sizes.items():
            if start not in self.found:
                site = self.blocks.site_of(start)[0]
                unreached[site] = unreached.get(site, 0) + size
        self.result.unreached = sorted(unreached.items(), key=lambda item: -item[1])

    def chain(self, index: int) -> Tuple[str, List[str], str, Optional[int]]:
        """The chain to the step at `index` as an expression, what it went through, and for a module's
        parameter the module nearest to it on the chain: its class, and its identity (to count models)."""
        steps = []
        while index >= 0:
            steps.append(index)
            index = self.steps[index][1]
        steps.reverse()
        text = ""
        through: List[str] = []
        owner, module = "", None
        torch = self.torch
        attributes = False  # the step before was an object's __dict__: its keys are attributes
        for position, step in enumerate(steps):
            value, parent, edge, _ = self.steps[step]
            if parent < 0:
                text = edge
            else:
                edge = edge or _edge(self.steps[parent][0], value)
                if attributes and edge.startswith("['") and edge[2:-2].isidentifier():
                    edge = "." + edge[2:-2]
                text += edge
            attributes = isinstance(value, dict) and parent >= 0 and edge == "" and type(value) is dict
            # The outermost module: the model, not its layers.
            if torch is not None and isinstance(value, torch.nn.Module) and module is None:
                owner, module = type(value).__name__, id(value)
            if edge == ".grad_fn":
                _add(through, "autograd graph")
            elif edge == ".grad":
                _add(through, "gradient")
            elif edge == "._base":
                _add(through, "view")
            elif isinstance(value, types.CellType):
                _add(through, "closure")
            elif isinstance(value, types.TracebackType):
                _add(through, "traceback")
            if position == len(steps) - 1 and torch is not None and isinstance(value, torch.Tensor):
                if isinstance(value, torch.nn.Parameter):
                    _add(through, "parameter")
                try:
                    if value.numel() * value.element_size() * 2 <= value.untyped_storage().nbytes():
                        _add(through, "view")
                except (RuntimeError, TypeError):
                    pass
        if "parameter" not in through:
            owner, module = "", None
        return text, through, owner, module


def _add(items: List[str], item: str) -> None:
    if item not in items:
        items.append(item)


def _is_ours(frame) -> bool:
    return os.path.dirname(os.path.abspath(frame.f_code.co_filename)) == _PACKAGE_DIRECTORY


def _edge(parent, child) -> str:
    """How `child` is reached from `parent`, as Python would spell it: [3], ['key'], .name."""
    if isinstance(parent, dict):
        for key, value in dict.items(parent):
            if value is child:
                return "[%r]" % (key,)
        return ".keys()"
    if isinstance(parent, (list, tuple)):
        for position, value in enumerate(list.__iter__(parent) if isinstance(parent, list) else parent):
            if value is child:
                return "[%d]" % position
    if isinstance(parent, types.FunctionType) and child is parent.__closure__:
        return ".__closure__"
    if isinstance(parent, types.CellType):
        return ".cell_contents"
    if isinstance(parent, types.TracebackType):
        return ".tb_frame" if child is parent.tb_frame else ".tb_next"
    if isinstance(parent, BaseException):
        for name in ("__traceback__", "__context__", "__cause__"):
            if getattr(parent, name, None) is child:
                return "." + name
    try:
        attributes = object.__getattribute__(parent, "__dict__")
    except (AttributeError, TypeError):
        attributes = None
    if attributes is child:
        return ""
    return " -> %s" % type(child).__name__


def _describe(value) -> str:
    """'a list with 60 items', 'a tensor', 'a Net'."""
    kind = type(value).__name__
    if isinstance(value, (list, dict, set, tuple)):
        return "%s with %d item%s" % (_article(kind), len(value), "" if len(value) == 1 else "s")
    return {"Tensor": "a tensor", "Parameter": "a parameter"}.get(kind) or _article(kind)


def _thread_name(thread_id: int) -> str:
    if thread_id == threading.main_thread().ident:
        return ""
    for thread in threading.enumerate():
        if thread.ident == thread_id:
            return " in thread %s" % thread.name
    return " in thread %d" % thread_id


# The text.

_ADVICE = {
    "autograd graph": "each tensor kept with its autograd graph keeps that step's activations: keep "
    "`loss.item()` for a number, or `.detach()` for a tensor",
    "view": "a slice or view keeps its whole base tensor's storage: keep `x[...].clone()` instead",
    "traceback": "the traceback keeps its frames' locals: `sys.last_traceback = sys.last_value = None` "
    "(in IPython, `%xdel` the names, or `%reset -f out`) drops them",
    "closure": "a function defined in a loop or a callback keeps what it closes over",
}


# PyTorch's own holders: what they are, said instead of advice.
_OWN = {"parameter": "parameters", "buffer": "buffers", "gradient": "gradients"}


def _own_text(holder: Holder) -> str:
    """'the parameters and gradients of a Net', 'the state of an Adam optimizer', or ''."""
    if holder.models:
        return "the parameters of %d model%s (%s)" % (holder.models, "" if holder.models == 1 else "s", holder.owner)
    if not holder.owner:
        return ""
    if "optimizer state" in holder.through:
        return "the state of %s optimizer" % _article(holder.owner)
    kinds = [_OWN[fact] for fact in holder.through if fact in _OWN]
    return "the %s of %s" % (" and ".join(kinds), _article(holder.owner)) if kinds else ""


def _article(noun: str) -> str:
    return ("an " if noun[:1].lower() in "aeiou" else "a ") + noun


def _sites_text(result: Why, sites: List[int]) -> str:
    where: List[str] = []
    for site in sites:
        _add(where, result.sites[site].where)
    return ", ".join(where[:3]) + (" and %d more sites" % (len(where) - 3) if len(where) > 3 else "")


def _text(result: Why) -> str:
    if result.problem:
        return _report.printable("gpuleak: why: " + result.problem)
    if not result.sites:
        return "gpuleak: why: the program holds no GPU memory that the trace saw it allocate"
    lines = ["gpuleak: what keeps this process's GPU memory alive (pid %d)" % result.pid]
    for holder in result.holders:
        own = _own_text(holder)
        # What a PyTorch user calls them; other libraries' are arrays.
        noun = "tensor" if "torch" in sys.modules else "array"
        lines.append(
            "  %s in %d %s%s made at %s: held by %s%s"
            % (
                _report.format_bytes(holder.bytes),
                holder.tensors,
                noun,
                "" if holder.tensors == 1 else "s",
                _sites_text(result, holder.sites),
                holder.root,
                ": " + own if own else "",
            )
        )
        if holder.path:
            lines.append("    through %s" % holder.path)
        if holder.models:
            lines.append(
                "    a model kept after its use keeps its parameters, gradients and optimizer state: keep what "
                "you need of it (a score, a `state_dict()` copied to the CPU) and drop the model"
            )
        elif not own:
            lines += ["    " + _ADVICE[fact] for fact in holder.through if fact in _ADVICE]
    for site, size in result.unreached:
        where = result.sites[site].where
        if result.sites[site].purpose and not result.stopped:
            # The report's words for the site end with what the library keeps it for.
            lines.append("  %s made at %s: not the program's to free" % (_report.format_bytes(size), where))
            continue
        lines.append(
            "  %s made at %s: not reached from the program's objects%s"
            % (
                _report.format_bytes(size),
                where,
                " (the search stopped after %.1f s and %d objects)" % (result.seconds, result.objects_searched)
                if result.stopped
                else " (held by C++ code, such as a library's workspace or cache, or by a bare pointer)",
            )
        )
    return "\n".join(_report.printable(line) for line in lines)
