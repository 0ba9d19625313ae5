"""``gpuleak.why()``: what keeps the GPU memory of this process alive, in the program's own terms.

The largest sites of the process's own trace (``gpuleak-report --live-blocks`` on it) say which lines
allocated the memory that is live and where each block is. The search starts from the program's roots
(the globals of ``__main__``, which in a notebook hold its ``Out`` and ``_`` history; the locals of the
frames running in every thread; the last exception's traceback) and, when those do not reach everything,
the globals of every other module. It follows Python's references (``gc.get_referents``), a closure's
cells, a frame's locals, and what PyTorch keeps out of Python's sight: a tensor's autograd graph
(``grad_fn``, ``next_functions``, the tensors its nodes saved, a leaf's ``AccumulateGrad``, a custom
Function's context), its gradient and the base of a view. Breadth first, so that each tensor is reached by
one of the shortest chains; each tensor's storage is counted once, for the root that reached it first.

It runs none of the program's code: types are told by ``type()``, not ``__class__``; containers are read
with their base types' methods (``dict.items``, ``list.__len__``), never a subclass's; a key is spelled
with ``repr`` only when it is a str, a number or None; tensor subclasses' ``__torch_function__`` is
switched off while it reads them. What it cannot avoid: reading a running function's locals
(``frame.f_locals``) leaves CPython 3.10-3.12's snapshot of them on the frame until they are read again or
the function returns, and reading a tensor an autograd node saved runs the saved-tensor hooks the program
registered (``torch.autograd.graph.saved_tensors_hooks``), which is why a search the program did not ask
for (at an out-of-memory error, at a phase's end) reads them only where the program never set any. It
keeps no object once it returns (the result holds only text and numbers), runs where it is called, under
the GIL, with the cyclic garbage collector paused, and stops after a time limit, saying what it did not
search.
"""

from __future__ import annotations

import bisect
import contextlib
import gc
import json
import keyword
import os
import sys
import sysconfig
import threading
import time
import types
from collections import deque
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Set, Tuple

from . import _magic, _native, _report

DEFAULT_TIME_LIMIT_S = 2.0
# The sites searched for: the report's growing sites, then its largest, that the program holds (not an
# allocator's segments).
SITES = 10
# How often the search looks at the clock, in objects.
CLOCK_EVERY = 512
# The autograd nodes a search reads to tell what kept tensors' graphs hold, in all: past them, the rest of
# the graphs are not told.
GRAPH_NODES = 200_000
# The passes a holder's graphs must join for gpuleak-report to call them a leak: its kMinPasses and
# kMinSpentPasses (process_model.h), which say why; the advice about running totals follows the second.
MIN_PASSES = 3
# The items of a dict the holder is, from which it is a cache that gains a key each step.
MIN_CACHED = 3
MIN_SPENT_PASSES = 16
_PACKAGE_DIRECTORY = os.path.dirname(os.path.abspath(__file__))
_CO_OPTIMIZED = 0x0001  # inspect.CO_OPTIMIZED, without importing inspect


@dataclass
class Site:
    """A site of the trace whose live memory was searched for: where it was allocated."""

    where: str
    bytes: int
    count: int
    growing: bool
    purpose: str = ""  # what a library keeps it for, where its stack says so ("cuBLAS's workspace, ...")
    stack_id: int = 0  # the trace's stack the report shows it with, and its kind: what the report ties it by
    kind: str = ""


@dataclass
class Graph:
    """The autograd graphs of the tensors a holder keeps (not those reached through another graph), as one."""

    path: str  # the chain to the tensor whose graph joins the most passes, as an expression
    nodes: int  # autograd nodes, less the leaves' (AccumulateGrad, one per parameter, shared by every pass)
    # The separate forward passes they join: from each tensor's node, down through the nodes that saved
    # nothing (a sum, a concatenation, a view), the first nodes that saved tensors, grouped by the nodes
    # they reach (one pass's nodes reach each other's, residual sums included; two passes share only the
    # parameters). `passes` still hold what their nodes saved; backward() already ran through
    # `spent_passes`, which can never be used again. A running total of losses joins one spent pass per
    # step; a validation set's outputs, kept in a list or concatenated, one pass per batch.
    passes: int
    spent_passes: int
    address: int = 0  # where that tensor's storage is on the device (or in pinned memory); 0 elsewhere
    bytes: int = 0  # of that tensor's storage
    # Of the passes and of the spent ones, those that tensor joins by itself: all of them for a running
    # total (a chain of sums), one for each tensor of a list of losses, each kept with its own graph.
    joined_by_one: int = 0
    spent_by_one: int = 0


@dataclass
class Holder:
    """A root of the program and what it holds of the sites' memory, through the chains found."""

    root: str  # "`losses`, a list in __main__ with 60 items"
    kind: str  # "global", "local", "traceback", "module"
    bytes: int = 0
    tensors: int = 0
    sites: List[int] = field(default_factory=list)  # indices into Why.sites
    path: str = ""  # the chain to its largest storage, as an expression: "losses[59].grad_fn..."
    # What the chains went through, as facts: "autograd graph", "saved for backward", "view", "parameter",
    # "buffer", "gradient", "optimizer state", "closure", "traceback", "pullback" (of jax.vjp).
    through: List[str] = field(default_factory=list)
    owner: str = ""  # for PyTorch's own holders: "Net", "Adam"
    models: int = 0  # the modules whose parameters it holds, where it is not a module itself
    site_bytes: Dict[int, int] = field(default_factory=dict)  # of bytes, what it holds of each site
    site_paths: Dict[int, str] = field(default_factory=dict)  # the chain to its largest storage of each site
    # Of site_bytes, what it holds through tensors autograd saved for a backward pass (its chain went through
    # a node's saved tensors): activations, which a graph no backward() will use keeps for nothing.
    saved_bytes: Dict[int, int] = field(default_factory=dict)
    graph: Optional[Graph] = None  # where its tensors' graphs join two passes or more
    # Where its chains went through a framework's output object: that object's class, and of bytes, what
    # each of its fields holds ("logits", "past_key_values").
    output: str = ""
    output_fields: Dict[str, int] = field(default_factory=dict)
    outputs: int = 0  # how many such objects: one is the last step's, kept by a name till the next
    # The most elements of a tensor it keeps: 1 where they are losses, more where they are a model's
    # outputs or feature maps.
    kept_elements: int = 0
    # Where it is an attribute of an object of the program's own class reached from a root: "Classifier.step_losses".
    attribute: str = ""


@dataclass
class Why:
    """The answer of :func:`why`: its text is what ``print`` shows."""

    pid: int
    trace: Optional[str]
    sites: List[Site] = field(default_factory=list)
    holders: List[Holder] = field(default_factory=list)
    # Of the sites' live memory, what no chain reached: (site index, bytes), most first.
    unreached: List[Tuple[int, int]] = field(default_factory=list)
    # What the trace counts by site only, without an address (its live slots ran out), so that nothing
    # could be searched for: (site index, bytes).
    unplaced: List[Tuple[int, int]] = field(default_factory=list)
    objects_searched: int = 0
    seconds: float = 0.0
    stopped: bool = False  # the time limit ended the search
    problem: Optional[str] = None  # why there is no answer
    # The tensors autograd's nodes saved were read; not at a moment the program did not ask about where
    # it set saved-tensor hooks, which reading them would run.
    saved_tensors_read: bool = True

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
    view's base). ``print(gpuleak.why())`` shows it; the result's fields hold the same as data. The answer
    is also recorded in the trace, where the report shows it beside the sites it names.

    Needs libgpuleak.so loaded (``gpuleak run``, the gpuleak Jupyter kernel) and gpuleak-report (see
    :mod:`gpuleak._report`). Searches for at most ``time_limit_s`` seconds, then says what it did not
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
# What a search the program did not ask for waits for gpuleak-report, at most.
IMPLICIT_REPORT_TIMEOUT_S = 30


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
        return _search(time_limit_s, implicit)
    finally:
        _thread_state.searching = False


def _search(time_limit_s: float, implicit: bool) -> Why:
    result = Why(pid=os.getpid(), trace=_native.trace_path())
    if result.trace is None:
        result.problem = "not recording: libgpuleak.so is not loaded in this process"
        return result
    document, problem = _report.run_report(
        result.trace,
        # Past the largest: a growing site may be small beside a model's parameters and workspaces.
        ["--live-blocks", "--top", str(SITES * 10)],
        IMPLICIT_REPORT_TIMEOUT_S if implicit else _report.REPORT_TIMEOUT_S,
    )
    process = _report.process_entry(document, result.pid, result.trace)
    if process is None:
        result.problem = problem or "the report has no entry for this process"
        return result
    blocks = _BlockIndex()
    # The growing sites first, however small beside a model's parameters: what holds them is the question.
    for site in sorted(process.get("leaks") or [], key=lambda site: not site.get("growing")):
        if site.get("segments") or len(result.sites) >= SITES:
            continue
        placed = site.get("blocks") or []
        unplaced = (site.get("bytes") or 0) - sum(size for _, size in placed)
        if unplaced > 0:
            result.unplaced.append((len(result.sites), unplaced))
        blocks.add(len(result.sites), placed)
        result.sites.append(
            Site(
                _site_where(site),
                site.get("bytes") or 0,
                site.get("count") or 0,
                bool(site.get("growing")),
                site.get("purpose") or "",
                site.get("stack_id") or 0,
                site.get("kind") or "",
            )
        )
    if not result.sites:
        return result
    result.saved_tensors_read = not implicit or _native.saved_tensor_hooks_never_set()
    started = time.monotonic()
    collecting = gc.isenabled()
    gc.disable()
    try:
        with _without_torch_function(), _without_dispatch_modes():
            _Search(blocks, result, started + time_limit_s).run()
    except Exception as error:  # the program asked a question: it goes on, whatever the answer
        result.problem = "the search failed: %s: %s" % (type(error).__name__, error)
    finally:
        if collecting:
            gc.enable()
    result.seconds = time.monotonic() - started
    return result


def _without_torch_function():
    """Tensor subclasses' ``__torch_function__`` off, where PyTorch can (2.0 and later)."""
    torch = sys.modules.get("torch")
    disable = getattr(getattr(torch, "_C", None), "DisableTorchFunctionSubclass", None)
    return disable() if disable is not None else contextlib.nullcontext()


def _without_dispatch_modes():
    """The program's TorchDispatchModes off (a search at an out-of-memory error may run inside one), where
    PyTorch has the switch."""
    dispatch = sys.modules.get("torch.utils._python_dispatch")
    disable = getattr(dispatch, "_disable_current_modes", None)
    return disable() if disable is not None else contextlib.nullcontext()


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


@dataclass
class _Chain:
    """What a chain to a storage went through."""

    through: List[str]
    owner: str = ""  # for a module's parameter, the outermost module on the chain: its class
    module: Optional[int] = None  # and its identity, to count models
    # The steps of the innermost object on the chain, past the root, of a class the program wrote (the
    # LightningModule a Trainer keeps) and of its attribute the chain went on by (`step_losses`): the
    # holder the program knows; -1 where there is none.
    written: int = -1
    attribute: int = -1
    # A framework's output object on the chain (a transformers ModelOutput, a dict of logits): its class,
    # the field the chain left it by, and its identity (to count them).
    output: Optional[Tuple[str, str, int]] = None
    # The elements of the first tensor on the chain (its root, or what a container holds), the one the
    # program keeps: 1 for a loss.
    kept_elements: int = 0


class _Search:
    def __init__(self, blocks: _BlockIndex, result: Why, deadline: float):
        self.blocks = blocks
        self.result = result
        self.deadline = deadline
        self.torch = sys.modules.get("torch")
        self.steps: List[_Step] = []
        self.seen: Set[int] = set()
        self.queue: deque = deque()
        self.roots: List[Tuple[str, str]] = []  # (description, kind)
        self.found: Dict[int, _Found] = {}  # by block start
        self.kinds: Dict[type, int] = {}
        self.module_dicts: Set[int] = set()
        self.visited = 0
        self.graph_steps: Set[int] = set()  # the steps reached through an autograd graph
        self.graphs: Dict[int, _Graphs] = {}  # by root: the graphs of the tensors it keeps
        self.graph_nodes = GRAPH_NODES
        self.node_attributes: Dict[type, Tuple[List[str], bool]] = {}
        self.written: Dict[type, bool] = {}

    # The roots, the program's first.

    def program_roots(self) -> None:
        main = sys.modules.get("__main__")
        if main is not None:
            for name, value in list(dict.items(main.__dict__)):
                if not name.startswith("__"):
                    self.root(value, "`%s`, %s in __main__" % (name, _describe(value)), "global", name)
        for thread_id, frame in list(sys._current_frames().items()):
            thread = _thread_name(thread_id)
            while frame is not None:
                if _is_function(frame) and not _is_ours(frame):
                    where = "%s() at %s:%d%s" % (
                        frame.f_code.co_name,
                        os.path.basename(frame.f_code.co_filename),
                        frame.f_lineno or 0,
                        thread,
                    )
                    for name, value in list(dict(frame.f_locals).items()):
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
        # IPython's traceback printer keeps the last traceback it showed, whatever becomes of sys's.
        traceback = _ipython_traceback()
        if traceback is not None:
            self.root(
                traceback,
                "IPython's copy of the last exception's traceback (get_ipython().InteractiveTB.tb), which keeps "
                "the locals of every frame it went through",
                "traceback",
                "get_ipython().InteractiveTB.tb",
            )

    def module_roots(self) -> None:
        for module_name, module in list(sys.modules.items()):
            if (
                not issubclass(type(module), types.ModuleType)
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
        try:
            self.name_torch_holders(value, root, path)
        except Exception:  # a module or an optimizer of the program's own making: found by the walk instead
            pass

    def name_torch_holders(self, value, root: int, path: str) -> None:
        """A model's parameters, buffers and gradients, and an optimizer's state, are PyTorch's own holders:
        named so, whatever other chain reaches them first (an optimizer's state is keyed by parameters).
        Read with PyTorch's own methods, never a subclass's."""
        torch = self.torch
        if torch is None:
            return
        if issubclass(type(value), torch.nn.Module):
            owner = type(value).__name__
            for name, parameter in torch.nn.Module.named_parameters(value):
                self.name_tensor(parameter, root, "%s.%s" % (path, name), "parameter", owner)
                if parameter.grad is not None:
                    self.name_tensor(parameter.grad, root, "%s.%s.grad" % (path, name), "gradient", owner)
            for name, buffer in torch.nn.Module.named_buffers(value):
                self.name_tensor(buffer, root, "%s.%s" % (path, name), "buffer", owner)
        elif issubclass(type(value), torch.optim.Optimizer):
            owner = type(value).__name__
            state = object.__getattribute__(value, "__dict__").get("state")
            if not issubclass(type(state), dict):
                return
            for number, per_parameter in enumerate(list(dict.values(state))):
                if not issubclass(type(per_parameter), dict):
                    continue
                for name, tensor in list(dict.items(per_parameter)):
                    if issubclass(type(tensor), torch.Tensor):
                        named = "%s.state[<parameter %d>]%s" % (path, number, _key(name))
                        self.name_tensor(tensor, root, named, "optimizer state", owner)

    def name_tensor(self, tensor, root: int, path: str, fact: str, owner: str) -> None:
        placed = self.place(tensor)
        if placed is not None and placed[1] not in self.found:
            self.found[placed[1]] = _Found(root, placed[0], path=path, through=[fact], owner=owner)

    # The walk.

    def run(self) -> None:
        for module in list(sys.modules.values()):
            if issubclass(type(module), types.ModuleType):
                self.module_dicts.add(id(module.__dict__))
        self.seen.update(id(value) for value in (self, self.steps, self.queue, self.seen, self.found, self.result))
        try:
            self.program_roots()
            stopped = self.walk()
            if not stopped and self.unfound_of_the_program():
                self.module_roots()
                stopped = self.walk()
            self.result.stopped = stopped
            self.result.objects_searched = self.visited
            self.summarize()
        finally:
            # Whatever ends it (an interrupt too), none of the program's objects stays referenced from here.
            self.steps.clear()
            self.queue.clear()
            self.graphs.clear()

    def unfound_of_the_program(self) -> bool:
        """Whether a block of a site that no library keeps for itself (a workspace) was not reached yet:
        only then are other modules' globals worth searching."""
        sites = self.result.sites
        return any(
            start not in self.found and not sites[self.blocks.site_of(start)[0]].purpose for start in self.blocks.sizes
        )

    def walk(self) -> bool:
        """True when the time limit stopped it."""
        steps, queue, seen, kinds = self.steps, self.queue, self.seen, self.kinds
        get_referents, monotonic, deadline = gc.get_referents, time.monotonic, self.deadline
        while queue:
            self.visited += 1
            if self.visited % CLOCK_EVERY == 0 and monotonic() > deadline:
                return True
            index = queue.popleft()
            value, _, _, root = steps[index]
            kind = kinds.get(type(value))
            if kind is None:
                kind = kinds[type(value)] = self.kind_of(type(value))
            if kind == _LEAVE:
                continue
            in_graph = kind == _NODE or index in self.graph_steps
            if kind == _FOLLOW:
                if id(value) in self.module_dicts:
                    continue
                children = get_referents(value)
                # One container of millions: the clock is read before its children are taken in.
                if len(children) > CLOCK_EVERY and monotonic() > deadline:
                    return True
                for child in children:
                    if id(child) not in seen and type(child) not in _ATOMIC:
                        seen.add(id(child))
                        steps.append((child, index, "", root))
                        queue.append(len(steps) - 1)
                        if in_graph:
                            self.graph_steps.add(len(steps) - 1)
                continue
            for child, edge in self.special_children(value, kind, index):
                if id(child) not in seen and type(child) not in _ATOMIC:
                    seen.add(id(child))
                    steps.append((child, index, edge, root))
                    queue.append(len(steps) - 1)
                    if in_graph:
                        self.graph_steps.add(len(steps) - 1)
        return False

    def kind_of(self, kind: type) -> int:
        torch = self.torch
        if torch is not None:
            if issubclass(kind, torch.Tensor):
                return _TENSOR
            # Node's subclass hook takes in every node class of the C++ autograd engine.
            if issubclass(kind, torch.autograd.graph.Node):
                return _NODE
        if issubclass(kind, types.FrameType):
            return _FRAME
        # Another library's device array (CuPy's, Numba's): its class says where its data is, by a
        # property or by a compiled class's descriptor.
        if any("__cuda_array_interface__" in _namespace(base) for base in _mro(kind)):
            return _ARRAY
        return _FOLLOW

    def special_children(self, value, kind: int, index: int):
        if kind == _TENSOR:
            self.storage_found(self.place(value), index)
            if index not in self.graph_steps and self.result.saved_tensors_read and self.graph_nodes > 0:
                try:
                    self.read_graph(value, index)
                except Exception:  # a node of an unusual kind: the graph goes untold, not the answer
                    pass
            yield from ((child, "") for child in gc.get_referents(value))
            names = ["grad_fn", "_base"]
            try:
                # A non-leaf's .grad warns (and is None) unless it retains it.
                if value.is_leaf or value.retains_grad:
                    names.append("grad")
            except RuntimeError:
                pass
            for name in names:
                try:
                    child = getattr(value, name)
                except (RuntimeError, AttributeError):
                    continue
                if child is not None:
                    yield child, "." + name
        elif kind == _ARRAY:
            try:
                placed = self.blocks.site_of(value.__cuda_array_interface__["data"][0])
            except Exception:  # a library's property that failed: nothing to place
                placed = None
            self.storage_found(placed, index)
            yield from ((child, "") for child in gc.get_referents(value))
        elif kind == _NODE:
            yield from self.graph_children(value)
        elif kind == _FRAME and _is_function(value) and not _is_ours(value):
            for name, local in list(dict(value.f_locals).items()):
                yield local, ".f_locals[%r]" % name

    def storage_found(self, placed: Optional[Tuple[int, int]], index: int) -> None:
        if placed is not None and placed[1] not in self.found:
            self.found[placed[1]] = _Found(self.steps[index][3], placed[0], step=index)

    def place(self, tensor) -> Optional[Tuple[int, int]]:
        """(site, block start) of the block a tensor's storage starts in, or None: a CUDA tensor's, or a CPU
        tensor's in a block of pinned or registered host memory (a DataLoader's pin_memory batches)."""
        try:
            device = tensor.device.type
            if device not in ("cuda", "cpu"):
                return None
            placed = self.blocks.site_of(tensor.untyped_storage().data_ptr())
        except (RuntimeError, TypeError, NotImplementedError):
            return None
        if placed is not None and device == "cpu" and self.result.sites[placed[0]].kind not in _HOST_KINDS:
            return None
        return placed

    def graph_children(self, node):
        try:
            for position, (child, _) in enumerate(node.next_functions):
                if child is not None:
                    yield child, ".next_functions[%d][0]" % position
        except (RuntimeError, TypeError, ValueError):
            pass
        # A custom Function's node is its context, a Python object: what the program set on it.
        yield from ((child, "") for child in gc.get_referents(node))
        saved, variable = self.attributes_of(node)
        for name in (saved if self.result.saved_tensors_read else []) + (["variable"] if variable else []):
            try:
                saved = getattr(node, name)
            except (RuntimeError, AttributeError):
                continue
            values = saved if issubclass(type(saved), (tuple, list)) else (saved,)
            for position, value in enumerate(values):
                if issubclass(type(value), self.torch.Tensor):
                    suffix = "[%d]" % position if values is saved else ""
                    yield value, ".%s%s" % (name, suffix)

    # What kept tensors' autograd graphs hold.

    def read_graph(self, tensor, index: int) -> None:
        """Adds the graph of `tensor`, reached at step `index`, to its root's graphs."""
        try:
            node = tensor.grad_fn
        except RuntimeError:
            return
        if node is None:
            return
        graphs = self.graphs.setdefault(self.steps[index][3], _Graphs())
        graphs.tensors.append((graphs.add(node), tensor, index))
        while graphs.unread < len(graphs.nodes):
            if self.graph_nodes <= 0 or (self.graph_nodes % CLOCK_EVERY == 0 and time.monotonic() > self.deadline):
                self.graph_nodes = 0
                graphs.cut = True
                return
            self.graph_nodes -= 1
            node = graphs.nodes[graphs.unread]
            try:
                try:
                    next_functions = node.next_functions
                except (RuntimeError, TypeError, ValueError):
                    next_functions = ()
                kids = [child for child, _ in next_functions if child is not None]
                state = self.saved_state(node)
            except Exception:  # a node of an unusual kind: this root's graphs go untold, not the answer
                graphs.cut = True
                return
            graphs.children.append([graphs.add(kid) for kid in kids if type(kid).__name__ != "AccumulateGrad"])
            graphs.saved.append(state)
            graphs.unread += 1

    def attributes_of(self, node) -> Tuple[List[str], bool]:
        """The names of what a node saved (`_saved_*`, a custom Function's `saved_tensors`), whose reading
        unpacks them, and whether it has a `variable` (a leaf's AccumulateGrad): once a node type."""
        attributes = self.node_attributes.get(type(node))
        if attributes is None:
            names = object.__dir__(node)
            attributes = self.node_attributes[type(node)] = (
                [name for name in names if name.startswith("_saved_") or name == "saved_tensors"],
                "variable" in names,
            )
        return attributes

    def saved_state(self, node) -> int:
        state = _NOTHING
        for name in self.attributes_of(node)[0]:
            try:
                value = getattr(node, name)
            except RuntimeError as error:
                # "... directly access saved tensors after they have already been freed ...", not another
                # error (a saved tensor changed in place since).
                if "freed" in str(error):
                    return _FREED
                continue
            except AttributeError:
                continue
            values = value if issubclass(type(value), (tuple, list)) else (value,)
            if any(issubclass(type(item), self.torch.Tensor) for item in values):
                state = _SAVED
        return state

    def graph_of(self, graphs: "_Graphs") -> Tuple[Optional[Graph], int]:
        """What a root's tensors' graphs join, where that is two passes or more, and the step of the tensor
        that joins the most."""
        if graphs.cut or graphs.unread < len(graphs.nodes):
            return None, -1
        passes, spent, tensor, step, joined_by_one, spent_by_one = graphs.passes()
        if passes + spent < 2:
            return None, -1
        # Its storage, where the report can find it among the live blocks: on the device, or in a searched
        # site of pinned memory (place() asks CUDA nothing).
        address = size = 0
        try:
            if tensor.device.type == "cuda" or self.place(tensor) is not None:
                storage = tensor.untyped_storage()
                address, size = storage.data_ptr(), storage.nbytes()
        except Exception:  # a tensor subclass's storage: the graph is still told, without it
            pass
        path = self.chain_text(step)
        return Graph(path, len(graphs.nodes), passes, spent, address, size, joined_by_one, spent_by_one), step

    # The answer.

    def summarize(self) -> None:
        holders: Dict[Tuple[int, int], Holder] = {}  # by root and the attribute it was reached through
        sizes = self.blocks.sizes
        chosen: Dict[Tuple[int, int], Tuple[int, _Found]] = {}  # by holder: its largest storage (bytes, found)
        chosen_of_site: Dict[Tuple[Tuple[int, int], int], Tuple[int, _Found]] = {}  # by holder and site: the same
        models: Dict[Tuple[int, int], Set[int]] = {}  # by holder: the modules whose parameters it holds
        outputs: Dict[Tuple[int, int], Set[int]] = {}  # by holder: the model outputs it holds
        for start, found in self.found.items():
            chain = _Chain(found.through, found.owner) if found.step < 0 else self.chain_facts(found.step)
            key, holder = self.holder_of(holders, found.root, chain)
            holder.owner = holder.owner or chain.owner
            holder.kept_elements = max(holder.kept_elements, chain.kept_elements)
            if chain.module is not None:
                models.setdefault(key, set()).add(chain.module)
            for fact in chain.through:
                _add(holder.through, fact)
            if chain.output is not None:
                holder.output = holder.output or chain.output[0]
                holder.output_fields[chain.output[1]] = holder.output_fields.get(chain.output[1], 0) + sizes[start]
                outputs.setdefault(key, set()).add(chain.output[2])
            holder.bytes += sizes[start]
            holder.site_bytes[found.site] = holder.site_bytes.get(found.site, 0) + sizes[start]
            if "saved for backward" in chain.through:
                holder.saved_bytes[found.site] = holder.saved_bytes.get(found.site, 0) + sizes[start]
            holder.tensors += 1
            if found.site not in holder.sites:
                holder.sites.append(found.site)
            if sizes[start] > chosen.get(key, (-1, found))[0]:
                chosen[key] = (sizes[start], found)
            if sizes[start] > chosen_of_site.get((key, found.site), (-1, found))[0]:
                chosen_of_site[(key, found.site)] = (sizes[start], found)
        # One chain a holder and site, spelled out: finding each step's key takes a look through its container.
        for (key, site), (_, found) in chosen_of_site.items():
            holders[key].site_paths[site] = found.path if found.step < 0 else self.chain_text(found.step)
        for key, (_, found) in chosen.items():
            holders[key].path = holders[key].site_paths[found.site]
        for key, held in models.items():
            holders[key].models = len(held)
        for key, held in outputs.items():
            holders[key].outputs = len(held)
        for root, graphs in self.graphs.items():
            try:
                graph, step = self.graph_of(graphs)
            except Exception:  # what the graphs join goes untold, not the answer
                graph = None
            if graph is None:
                continue
            # The holder of the tensor that joins the most: where the root's graphs are kept.
            self.holder_of(holders, root, self.chain_facts(step))[1].graph = graph
        self.result.holders = sorted(holders.values(), key=lambda holder: -holder.bytes)
        unreached: Dict[int, int] = {}
        for start, size in sizes.items():
            if start not in self.found:
                site = self.blocks.site_of(start)[0]
                unreached[site] = unreached.get(site, 0) + size
        self.result.unreached = sorted(unreached.items(), key=lambda item: -item[1])

    def holder_of(
        self, holders: Dict[Tuple[int, int], Holder], root: int, chain: _Chain
    ) -> Tuple[Tuple[int, int], Holder]:
        """The holder of a storage that `chain` reached from `root`: the root, or the attribute of an object
        of the program's own class that the chain went through, named by its class and reached from the root."""
        attribute = chain.attribute
        key = (root, id(self.steps[attribute][0]) if attribute >= 0 else 0)
        holder = holders.get(key)
        if holder is None:
            description, kind = self.roots[root]
            named = self.attribute_name(chain.written, attribute) if attribute >= 0 else ""
            if named:
                description = "`%s`, %s, reached from %s" % (named, _describe(self.steps[attribute][0]), description)
            holder = holders[key] = Holder(root=description, kind=kind, attribute=named)
        return key, holder

    def attribute_name(self, written: int, attribute: int) -> str:
        """'Classifier.step_losses': the attribute at step `attribute` of the object at step `written`, after
        its class; '' where the chain does not spell it as an attribute."""
        edge = self.chain_text(attribute, after=written)
        if not edge.startswith(".") or not _attribute_name(edge[1:]):
            return ""
        return type(self.steps[written][0]).__name__ + edge

    def chain_steps(self, index: int) -> List[int]:
        steps = []
        while index >= 0:
            steps.append(index)
            index = self.steps[index][1]
        steps.reverse()
        return steps

    def chain_facts(self, index: int) -> _Chain:
        """What the chain to the step at `index` went through; for a module's parameter, the outermost module
        on the chain (the model, not its layer); the innermost object of the program's own class and its
        attribute; a framework's output object and its field."""
        chain = _Chain([])
        through = chain.through
        torch = self.torch
        steps = self.chain_steps(index)
        for position, step in enumerate(steps):
            value, _, edge, _ = self.steps[step]
            kind = type(value)
            if torch is not None and issubclass(kind, torch.nn.Module) and chain.module is None:
                chain.owner, chain.module = kind.__name__, id(value)
            if torch is not None and not chain.kept_elements and issubclass(kind, torch.Tensor):
                try:
                    chain.kept_elements = value.numel()
                except (RuntimeError, TypeError):
                    pass
            if edge == ".grad_fn":
                _add(through, "autograd graph")
            elif edge.startswith(("._saved_", ".saved_tensors")):
                _add(through, "saved for backward")
            elif edge == ".grad":
                _add(through, "gradient")
            elif edge == "._base":
                _add(through, "view")
            elif issubclass(kind, types.CellType):
                _add(through, "closure")
            elif issubclass(kind, types.TracebackType):
                _add(through, "traceback")
            elif _is_pullback(kind):
                _add(through, "pullback")
            if position + 1 >= len(steps):
                continue
            # What it holds is the next step, or the one after where the next is its attribute dict.
            member = steps[position + 1]
            if position + 2 < len(steps) and _is_attribute_dict(value, self.steps[member][0]):
                member = steps[position + 2]
            if position > 0 and self.written_by_program(kind):
                chain.written, chain.attribute = step, member
            if chain.output is None and _is_model_output(value):
                field = self.chain_text(member, after=step)
                chain.output = ("dict of outputs" if kind is dict else kind.__name__, field.strip(".[]'\""), id(value))
        tensor = self.steps[steps[-1]][0]
        if torch is not None and issubclass(type(tensor), torch.Tensor):
            if issubclass(type(tensor), torch.nn.Parameter):
                _add(through, "parameter")
            try:
                if tensor.numel() * tensor.element_size() * 2 <= tensor.untyped_storage().nbytes():
                    _add(through, "view")
            except (RuntimeError, TypeError):
                pass
        if "parameter" not in through:
            chain.owner, chain.module = "", None
        if any(fact in through for fact in _OWN_FACTS):
            # PyTorch's own holders are named by their model or optimizer, not by an attribute on the way.
            chain.written = chain.attribute = -1
        else:
            # A dict that the holder is, keyed by what changes every step, is a cache that never drops a value.
            held = self.steps[chain.attribute if chain.attribute >= 0 else steps[0]][0]
            if len(steps) > 1 and _is_cache(held):
                _add(through, "cache")
        if chain.output is not None:
            _add(through, "model output")
        return chain

    def written_by_program(self, kind: type) -> bool:
        """Whether `kind` is a class of the program's own (its module is __main__ or a file outside the
        installed packages and the standard library), not a library's: once a class."""
        written = self.written.get(kind)
        if written is None:
            written = self.written[kind] = _written_by_program(kind)
        return written

    def chain_text(self, index: int, after: int = -1) -> str:
        """The chain to the step at `index`, as Python would spell it; from the step `after` on it, only
        what follows that step ('.step_losses' of an object, "['logits']" of a model's output)."""
        text = ""
        attributes = False  # the step before was an object's __dict__: its keys are attributes
        steps = self.chain_steps(index)
        if after >= 0:
            steps = steps[steps.index(after) + 1 :]
        for step in steps:
            value, parent, edge, _ = self.steps[step]
            if parent < 0:
                text = edge
                attributes = False
                continue
            edge = edge or _edge(self.steps[parent][0], value)
            if attributes and edge.startswith("['") and _attribute_name(edge[2:-2]):
                edge = "." + edge[2:-2]
            text += edge
            attributes = edge == "" and issubclass(type(value), dict)
        return text


# The sites whose memory a CPU tensor may lie in.
_HOST_KINDS = frozenset(("pinned_host", "host_registered"))

# What an autograd node saved: nothing, tensors, or tensors that backward() freed.
_NOTHING, _SAVED, _FREED = range(3)


class _Graphs:
    """The autograd graphs of the tensors one root keeps, read into one set of nodes: each node once, its
    wrapper kept alive while the search runs, so that its id is its own."""

    def __init__(self):
        self.nodes: List[object] = []
        self.index: Dict[int, int] = {}
        self.children: List[List[int]] = []  # of each node read, by index
        self.saved: List[int] = []  # of each node read: _NOTHING, _SAVED or _FREED
        self.unread = 0
        self.tensors: List[Tuple[int, object, int]] = []  # (its node, the tensor, its step)
        self.cut = False  # the nodes to read ran out: not told

    def add(self, node) -> int:
        position = self.index.get(id(node))
        if position is None:
            position = self.index[id(node)] = len(self.nodes)
            self.nodes.append(node)
        return position

    def first_of(self, roots: List[int]) -> Set[int]:
        """From `roots`, down through the nodes that saved nothing, the first nodes that saved tensors."""
        above: Set[int] = set()
        first: Set[int] = set()
        pending = list(roots)
        while pending:
            node = pending.pop()
            if node in above or node in first:
                continue
            if self.saved[node] != _NOTHING:
                first.add(node)
                continue
            above.add(node)
            pending.extend(self.children[node])
        return first

    # The tensors whose own passes are counted to choose the one that names the graphs: a holder of more
    # (a list of outputs) is named by the one with the most among its first.
    TENSORS_WEIGHED = 64

    def passes(self) -> Tuple[int, int, object, int, int, int]:
        """The passes joined (Graph.passes, Graph.spent_passes), the tensor that joins the most with its
        step, and the passes and spent passes it joins by itself: the first nodes grouped by what they reach. A node the first nodes reach joins its children,
        as every node of a pass does; only the nodes above them all (the sum or concatenation that joins
        the passes) do not."""
        first = self.first_of([node for node, _, _ in self.tensors])
        below: Set[int] = set()
        pending = list(first)
        while pending:
            node = pending.pop()
            if node not in below:
                below.add(node)
                pending.extend(self.children[node])
        group = list(range(len(self.nodes)))

        def find(node: int) -> int:
            while group[node] != node:
                group[node] = group[group[node]]
                node = group[node]
            return node

        for node in below:
            for kid in self.children[node]:
                group[find(kid)] = find(node)
        spent_groups = {find(node) for node in below if self.saved[node] == _FREED}
        groups = {find(node) for node in first}
        joined, tensor, step = max(
            (({find(node) for node in self.first_of([node])}, tensor, step) for node, tensor, step in
             self.tensors[: self.TENSORS_WEIGHED]),
            key=lambda entry: len(entry[0]),
        )
        return len(groups - spent_groups), len(groups & spent_groups), tensor, step, len(joined), len(joined & spent_groups)


def _add(items: List[str], item: str) -> None:
    if item not in items:
        items.append(item)


def _is_function(frame) -> bool:
    """A function's frame, whose locals are its own (a module's or a class body's are its namespace)."""
    return bool(frame.f_code.co_flags & _CO_OPTIMIZED)


def _is_pullback(kind: type) -> bool:
    """A pullback of jax.vjp (JAX's VJP class), told by its type's name and module, never by reading it."""
    module = getattr(kind, "__module__", "") or ""
    return module.startswith("jax.") and kind.__name__ == "VJP"


def _is_ours(frame) -> bool:
    return os.path.dirname(os.path.abspath(frame.f_code.co_filename)) == _PACKAGE_DIRECTORY


def _key(key) -> str:
    """A dict key as an index: repr'd where repr is the language's own (no program code runs)."""
    if type(key) in (str, int, float, bool, bytes, type(None)):
        return "[%r]" % (key,)
    return "[<%s>]" % type(key).__name__


def _attribute_name(name: str) -> bool:
    return name.isidentifier() and not keyword.iskeyword(name)


def _attributes(value) -> Optional[dict]:
    """An object's attribute dict, read without its class's code; None where it has none."""
    try:
        attributes = object.__getattribute__(value, "__dict__")
    except (AttributeError, TypeError):
        return None
    return attributes if issubclass(type(attributes), dict) else None


def _is_attribute_dict(owner, value) -> bool:
    return issubclass(type(value), dict) and _attributes(owner) is value


# The keys by which a plain dict is a model's output; a transformers ModelOutput is told by its class.
_OUTPUT_KEYS = ("logits", "past_key_values", "hidden_states")


def _is_cache(value) -> bool:
    kind = type(value)
    return issubclass(kind, dict) and not _is_model_output(value) and dict.__len__(value) >= MIN_CACHED


def _is_model_output(value) -> bool:
    kind = type(value)
    if not issubclass(kind, dict):
        return False
    if any(base.__name__ == "ModelOutput" and str(_namespace(base).get("__module__", "")).startswith("transformers")
           for base in _mro(kind)):
        return True
    return any(dict.__contains__(value, key) for key in _OUTPUT_KEYS)


# Where the interpreter's standard library lies: a class of a module there is not the program's.
_STANDARD_LIBRARY = tuple(
    sorted({os.path.realpath(sysconfig.get_paths()[name]) + os.sep for name in ("stdlib", "platstdlib")})
)


def _written_by_program(kind: type) -> bool:
    module_name = _namespace(kind).get("__module__")
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


def _edge(parent, child) -> str:
    """How `child` is reached from `parent`, as Python would spell it: [3], ['key'], .name; "" for an
    object's attribute dict (its keys then read as attributes)."""
    kind = type(parent)
    attributes = _attributes(parent)
    if attributes is child:
        return ""
    if attributes is not None:
        # An object whose attributes the interpreter keeps inline (3.12+) gives them as its referents.
        for name, value in list(dict.items(attributes)):
            if value is child and type(name) is str and _attribute_name(name):
                return "." + name
    if issubclass(kind, type) and issubclass(type(child), dict) and dict.keys(child) == _namespace(parent).keys():
        return ""  # a class's namespace
    if issubclass(kind, dict):
        for key, value in list(dict.items(parent)):
            if value is child:
                return _key(key)
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
    for base in _mro(kind):
        for name, attribute in list(_namespace(base).items()):
            if issubclass(type(attribute), types.MemberDescriptorType):
                try:
                    if attribute.__get__(parent) is child:
                        return "." + name
                except AttributeError:
                    continue
    return " -> %s" % kind.__name__


def _mro(kind: type) -> tuple:
    return type.__getattribute__(kind, "__mro__")


def _namespace(kind: type):
    """A class's attributes, read past any metaclass's __getattribute__."""
    return type.__getattribute__(kind, "__dict__")


def _describe(value) -> str:
    """'a list with 60 items', 'a tensor', 'a Net': by its type, its size read with its base type's own
    __len__."""
    kind = type(value)
    for base in (list, dict, set, tuple):
        if issubclass(kind, base):
            size = base.__len__(value)
            return "%s with %d item%s" % (_article(kind.__name__), size, "" if size == 1 else "s")
    if issubclass(kind, type):
        return "a class"
    return {"Tensor": "a tensor", "Parameter": "a parameter"}.get(kind.__name__) or _article(kind.__name__)


def _ipython_traceback():
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
    "spent graph": "each tensor kept with its autograd graph keeps that step's graph, which `backward()` already "
    "ran through: keep `loss.item()` for a number, or `.detach()` for a tensor",
    "kept tensors": "each tensor kept with its autograd graph stays on the device with that step's graph: keep "
    "`.detach().cpu()` of what you need (a copy on the host, without the graph)",
    "view": "a slice or view keeps its whole base tensor's storage: keep `x[...].clone()` instead",
    "traceback": "the traceback keeps its frames' locals: "
    "`sys.last_traceback = sys.last_value = sys.last_exc = None` drops them; in IPython also "
    "`get_ipython().InteractiveTB.tb = None`, which drops its copy (and `%xdel` the names or `%reset -f out` the "
    "outputs that hold them)",
    "closure": "a function defined in a loop or a callback keeps what it closes over",
    "cache": "a dict that keeps a value for each new key grows with its keys: key it by what repeats (a length, a "
    "shape), bound it (`functools.lru_cache(maxsize=...)`), or clear it",
    "pullback": "a pullback of `jax.vjp` keeps every array its forward pass saved for it: keep the gradients it "
    "gives, not the pullback",
}


# PyTorch's own holders: what they are, said instead of advice.
_OWN = {"parameter": "parameters", "buffer": "buffers", "gradient": "gradients"}
_OWN_FACTS = ("parameter", "buffer", "gradient", "optimizer state")


def _advice(holder: Holder) -> List[str]:
    """What to change, where what the holder's chains went through says."""
    advice = []
    if holder.models:
        advice.append(
            "a model kept after its use keeps its parameters, gradients and optimizer state: keep what you need "
            "of it (a score, a `state_dict()` copied to the CPU) and drop the model"
        )
    through = list(holder.through)
    kept_outputs = holder.outputs >= 2
    if kept_outputs:
        advice.append(_output_advice(holder))
    if holder.graph is not None and holder.graph.spent_passes >= MIN_SPENT_PASSES:
        # One tensor that joins them all is a sum of them; many, each with its own, were kept one by one.
        if holder.graph.spent_by_one >= MIN_SPENT_PASSES:
            advice.append(
                "a running total of losses keeps every step's graph: add `loss.item()` (a number), or `loss.detach()`"
            )
        else:
            # Where no pass holds what it saved any more, backward() freed the activations: the graphs remain.
            _add(through, "autograd graph" if holder.graph.passes else "spent graph")
    if kept_outputs:
        # The output's advice says what to keep of it.
        through = [fact for fact in through if fact not in ("autograd graph", "spent graph")]
    elif holder.kept_elements > 1:
        # Not losses but tensors (outputs, feature maps) whose graphs backward() used: they are the memory.
        through = ["kept tensors" if fact == "spent graph" else fact for fact in through]
    if holder.attribute:
        advice.append(
            "`%s` lives as long as its object: what each step adds to it stays until it is cleared, so keep "
            "numbers in it (`loss.item()`), or clear it where each epoch ends" % holder.attribute
        )
    return advice + [_ADVICE[fact] for fact in through if fact in _ADVICE]


# How to keep less of a model's output, by the fields that held the most ({} is how a field is read).
_FIELD_ADVICE = {
    "loss": "`outputs{loss}.item()` for the loss",
    "logits": "`outputs{logits}.detach().cpu()` where the logits are needed",
    "past_key_values": "`use_cache=False` in the model's call when training (no attention cache is made)",
    "cache": "`use_cache=False` in the model's call when training (no attention cache is made)",
    "hidden_states": "no `output_hidden_states=True` unless they are used",
    "attentions": "no `output_attentions=True` unless they are used",
}


def _output_advice(holder: Holder) -> str:
    fields = sorted(holder.output_fields.items(), key=lambda item: -item[1])
    held = ", its ".join("`%s` %s" % (name, _report.format_bytes(size)) for name, size in fields[:4])
    spelled = "[%r]" if holder.output == "dict of outputs" else ".%s"
    cures: List[str] = []
    for name in ["loss"] + [name for name, _ in fields]:
        cure = _FIELD_ADVICE.get(name, "").replace("{%s}" % name, spelled % name)
        if cure:
            _add(cures, cure)
    return "each step's %s is kept whole: its %s. Keep only what is needed of it: %s" % (
        holder.output,
        held,
        ", ".join(cures[:-1]) + (" and " if len(cures) > 1 else "") + cures[-1],
    )


def _graph_text(graph: Graph) -> str:
    told = []
    if graph.passes:
        told.append("%d forward passes with the tensors they saved" % graph.passes)
    if graph.spent_passes:
        told.append("%d backward passes, which can never be used again" % graph.spent_passes)
    if graph.joined_by_one >= graph.passes + graph.spent_passes:
        return "%s keeps the autograd graphs of %s (%d nodes)" % (graph.path, " and ".join(told), graph.nodes)
    return "its tensors keep the autograd graphs of %s (%d nodes), each its own: %s keeps %d of them" % (
        " and ".join(told),
        graph.nodes,
        graph.path,
        graph.joined_by_one,
    )


def _own_text(holder: Holder) -> str:
    """'the parameters and gradients of a Net', 'the state of an Adam optimizer', or ''."""
    if holder.models:
        return "the parameters of %d model%s (%s)" % (
            holder.models,
            "" if holder.models == 1 else "s",
            holder.owner,
        )
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
        if not holder.sites:
            lines.append("  %s: %s" % (holder.root, _graph_text(holder.graph)))
            lines += ["    " + advice for advice in _advice(holder)]
            continue
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
        if holder.graph is not None:
            lines.append("    %s" % _graph_text(holder.graph))
        lines += ["    " + advice for advice in _advice(holder)]
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
    for site, size in result.unplaced:
        lines.append(
            "  %s made at %s: counted by site only in the trace (its live slots ran out: no addresses), so not "
            "searched for" % (_report.format_bytes(size), result.sites[site].where)
        )
    return "\n".join(_report.printable(line) for line in lines)


# The record in the trace.

# A chain, a root's words or a problem longer than this is cut in the record (the text above shows it whole).
_RECORD_CHARACTERS = 1000


def _cut(text: str) -> str:
    return text[:_RECORD_CHARACTERS]


def document(result: Why, moment: str, device: Optional[int] = None) -> bytes:
    """The JSON of `result` that the trace records (gpuleak_retainers) and gpuleak-report reads: the sites by
    the stack and kind the report showed them with, each holder's words, the sites it held with their bytes
    and the chain to its largest storage there.
    `moment`: "out_of_memory" (with `device`), "phase_end", "exit" or "on_demand". Holders past what the C side
    keeps (``_native.MAX_RETAINERS_BYTES``) are left out, the smallest first, those with a graph last."""
    holders = [
        {
            "root": _cut(holder.root),
            "kind": holder.kind,
            "bytes": holder.bytes,
            "tensors": holder.tensors,
            "sites": [
                [site, size, _cut(holder.site_paths.get(site, ""))]
                for site, size in sorted(holder.site_bytes.items(), key=lambda item: -item[1])
            ],
            "path": _cut(holder.path),
            "through": holder.through,
            "saved": sorted(holder.saved_bytes.items(), key=lambda item: -item[1]),
            "graph": None
            if holder.graph is None
            else {
                "path": _cut(holder.graph.path),
                "nodes": holder.graph.nodes,
                "passes": holder.graph.passes,
                "spent_passes": holder.graph.spent_passes,
                "spent_by_one": holder.graph.spent_by_one,
                "address": holder.graph.address,
                "bytes": holder.graph.bytes,
            },
            "own": _own_text(holder),
            "owner": holder.owner,
            "models": holder.models,
            "advice": _advice(holder),
        }
        for holder in result.holders
    ]
    body = {
        "moment": moment,
        "seconds": round(result.seconds, 3),
        "objects_searched": result.objects_searched,
        "stopped": result.stopped,
        "problem": _cut(result.problem or ""),
        "saved_tensors_read": result.saved_tensors_read,
        "sites": [{"stack_id": site.stack_id, "kind": site.kind, "bytes": site.bytes} for site in result.sites],
        "holders": holders,
        "unreached": result.unreached,
    }
    if device is not None:
        body["device"] = device
    while True:
        # What UTF-8 cannot hold (a file name's undecodable bytes, as surrogates) becomes "?": the report
        # reads the document as UTF-8.
        data = json.dumps(body, separators=(",", ":"), ensure_ascii=False).encode("utf-8", "replace")
        if len(data) <= _native.MAX_RETAINERS_BYTES or not holders:
            return data
        # The smallest first, but a holder whose graphs make a leak last: a running total's scalar is among
        # the smallest.
        untold = [index for index, holder in enumerate(holders) if not _tells_a_leak(holder["graph"])]
        holders.pop(untold[-1] if untold else -1)


def _tells_a_leak(graph: Optional[dict]) -> bool:
    return graph is not None and (graph["passes"] >= MIN_PASSES or graph["spent_passes"] >= MIN_SPENT_PASSES)


def record(result: Why, label: str, moment: str, device: Optional[int] = None) -> None:
    """Records `result` in this process's trace under `label`; nothing where there is no trace."""
    if result.trace is not None:
        _native.retainers(label, document(result, moment, device))
