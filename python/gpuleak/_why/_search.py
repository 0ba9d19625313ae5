"""The search for what holds the sites' live blocks. It starts from the program's roots (the globals of
``__main__``, which in a notebook hold its ``Out`` and ``_`` history; the locals of the frames running in
every thread; the last exception's traceback) and, when those do not reach everything, the globals of every
other module. It follows Python's references (``gc.get_referents``), a closure's cells, a frame's locals,
and what PyTorch keeps out of Python's sight: a tensor's autograd graph (``grad_fn``, ``next_functions``,
the tensors its nodes saved, a leaf's ``AccumulateGrad``, a custom Function's context), its gradient and
the base of a view. TensorFlow's tensors and variables are placed through DLPack (:mod:`._tensorflow`).
Breadth first, so that each tensor is reached by one of the shortest chains; each tensor's storage is
counted once, for the root that reached it first.

It runs none of the program's code (:mod:`gpuleak._why._objects` reads its objects; TensorFlow's own code
exports its tensors); tensor subclasses' ``__torch_function__`` is switched off while it reads them. What
it cannot avoid: reading a running function's locals (``frame.f_locals``) leaves CPython 3.10-3.12's
snapshot of them on the frame until they are read again or the function returns, and reading a tensor an
autograd node saved runs the saved-tensor hooks the program registered
(``torch.autograd.graph.saved_tensors_hooks``), which is why a search the program did not ask for (at an
out-of-memory error, at a phase's end) reads them only where the program never set any. It keeps no object
once it returns (the answer holds only text and numbers), runs where it is called, under the GIL, with the
cyclic garbage collector paused, and stops after a time limit, saying what it did not search.
"""

from __future__ import annotations

import contextlib
import gc
import os
import sys
import time
import types
from collections import deque
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Set, Tuple

from .. import _native
from . import _objects
from ._answer import Answer, Graph, Holder, add_once
from ._chains import Chain, Chains, Step
from ._graphs import CLOCK_EVERY, GraphReader, Graphs
from ._sites import BlockIndex
from ._tensorflow import TensorFlowData

# The sites whose memory a CPU tensor may lie in.
_HOST_KINDS = frozenset(("pinned_host", "host_registered"))


def search(result: Answer, blocks: BlockIndex, time_limit_s: float, implicit: bool) -> None:
    """Finds what holds `blocks`, the live blocks of `result.sites`, for at most `time_limit_s` seconds, and
    puts it in `result`; `implicit`: for a moment the program did not ask about, where the tensors autograd
    saved are not unpacked if unpacking could run the program's code."""
    result.saved_tensors_read = not implicit or _native.saved_tensor_hooks_never_set()
    started = time.monotonic()
    collecting = gc.isenabled()
    gc.disable()
    try:
        with _without_torch_function(), _without_dispatch_modes():
            Search(blocks, result, started + time_limit_s).run()
    except Exception as error:  # the program asked a question: it goes on, whatever the answer
        result.problem = "the search failed: %s: %s" % (type(error).__name__, error)
    finally:
        if collecting:
            gc.enable()
    result.seconds = time.monotonic() - started


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


def _cuda_array_address(array) -> Optional[int]:
    """The device address of another library's array (CuPy's, Numba's), as its
    ``__cuda_array_interface__`` says; None where its property failed."""
    try:
        return array.__cuda_array_interface__["data"][0]
    except Exception:  # a library's property that failed: nothing to place
        return None


# What the walk does with an object, by its type.
_FOLLOW, _TENSOR, _NODE, _FRAME, _LEAVE, _ARRAY, _TENSORFLOW = range(7)
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


class Search:
    """One walk from the program's roots to the sites' blocks, and the holders it names in its answer."""

    def __init__(self, blocks: BlockIndex, result: Answer, deadline: float):
        self.blocks = blocks
        self.result = result
        self.deadline = deadline
        self.torch = sys.modules.get("torch")
        self.tensorflow = TensorFlowData()
        self.steps: List[Step] = []
        self.seen: Set[int] = set()
        self.queue: deque = deque()
        self.roots: List[Tuple[str, str]] = []  # (description, kind)
        self.found: Dict[int, _Found] = {}  # by block start
        self.kinds: Dict[type, int] = {}
        self.module_dicts: Set[int] = set()
        self.visited = 0
        self.graph_steps: Set[int] = set()  # the steps reached through an autograd graph
        self.graphs = GraphReader(self.torch, deadline)  # of the tensors each root keeps
        self.chains = Chains(self.steps, self.torch)

    # The roots, the program's first.

    def program_roots(self) -> None:
        main = sys.modules.get("__main__")
        if main is not None:
            for name, value in list(dict.items(main.__dict__)):
                if not name.startswith("__"):
                    self.root(value, "`%s`, %s in __main__" % (name, _objects.describe(value)), "global", name)
        for thread_id, frame in list(sys._current_frames().items()):
            thread = _objects.thread_name(thread_id)
            while frame is not None:
                if _objects.is_function(frame) and not _objects.is_ours(frame):
                    where = "%s() at %s:%d%s" % (
                        frame.f_code.co_name,
                        os.path.basename(frame.f_code.co_filename),
                        frame.f_lineno or 0,
                        thread,
                    )
                    for name, value in list(dict(frame.f_locals).items()):
                        described = "`%s`, %s, a local of %s" % (name, _objects.describe(value), where)
                        self.root(value, described, "local", name)
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
        traceback = _objects.ipython_traceback()
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
                    self.root(value, "`%s.%s`, %s" % (module_name, name, _objects.describe(value)), "module", name)

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
                        named = "%s.state[<parameter %d>]%s" % (path, number, _objects.key_text(name))
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
            self.graphs.by_root.clear()

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
        if self.tensorflow.holds(kind):
            return _TENSORFLOW
        # Another library's device array (CuPy's, Numba's): its class says where its data is, by a
        # property or by a compiled class's descriptor.
        if any("__cuda_array_interface__" in _objects.namespace(base) for base in _objects.mro(kind)):
            return _ARRAY
        return _FOLLOW

    def special_children(self, value, kind: int, index: int):
        if kind == _TENSOR:
            self.storage_found(self.place(value), index)
            if index not in self.graph_steps and self.result.saved_tensors_read and self.graphs.nodes_left > 0:
                try:
                    self.graphs.read(value, self.steps[index][3], index)
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
        elif kind in (_ARRAY, _TENSORFLOW):
            address = self.tensorflow.address(value) if kind == _TENSORFLOW else _cuda_array_address(value)
            self.storage_found(self.blocks.site_of(address) if address else None, index)
            yield from ((child, "") for child in gc.get_referents(value))
        elif kind == _NODE:
            yield from self.graph_children(value)
        elif kind == _FRAME and _objects.is_function(value) and not _objects.is_ours(value):
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
        saved, variable = self.graphs.attributes_of(node)
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

    def graph_of(self, graphs: Graphs) -> Tuple[Optional[Graph], int]:
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
        path = self.chains.text(step)
        return Graph(path, len(graphs.nodes), passes, spent, address, size, joined_by_one, spent_by_one), step

    # The answer.

    def summarize(self) -> None:
        holders: Dict[Tuple[int, int], Holder] = {}  # by root and the attribute it was reached through
        sizes = self.blocks.sizes
        storages_of: Dict[Tuple[int, int], List[Tuple[int, _Found]]] = {}  # by holder: (bytes, found) of each
        storages_of_site: Dict[Tuple[Tuple[int, int], int], List[Tuple[int, _Found]]] = {}  # by holder and site
        models: Dict[Tuple[int, int], Set[int]] = {}  # by holder: the modules whose parameters it holds
        outputs: Dict[Tuple[int, int], Set[int]] = {}  # by holder: the model outputs it holds
        for start, found in self.found.items():
            chain = Chain(found.through, found.owner) if found.step < 0 else self.chains.facts(found.step)
            key, holder = self.holder_of(holders, found.root, chain)
            holder.owner = holder.owner or chain.owner
            holder.kept_elements = max(holder.kept_elements, chain.kept_elements)
            if chain.module is not None:
                models.setdefault(key, set()).add(chain.module)
            for fact in chain.through:
                add_once(holder.through, fact)
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
            storages_of.setdefault(key, []).append((sizes[start], found))
            storages_of_site.setdefault((key, found.site), []).append((sizes[start], found))
        # One chain a holder and one a holder and site, spelled out: finding each step's key takes a look
        # through its container.
        for key, storages in storages_of.items():
            holders[key].path = self.path_through_most(storages)
        for (key, site), storages in storages_of_site.items():
            holders[key].site_paths[site] = self.path_through_most(storages)
        for key, held in models.items():
            holders[key].models = len(held)
        for key, held in outputs.items():
            holders[key].outputs = len(held)
        for root, graphs in self.graphs.by_root.items():
            try:
                graph, step = self.graph_of(graphs)
            except Exception:  # what the graphs join goes untold, not the answer
                graph = None
            if graph is None:
                continue
            # The holder of the tensor that joins the most: where the root's graphs are kept.
            self.holder_of(holders, root, self.chains.facts(step))[1].graph = graph
        self.result.holders = sorted(holders.values(), key=lambda holder: -holder.bytes)
        unreached: Dict[int, int] = {}
        for start, size in sizes.items():
            if start not in self.found:
                site = self.blocks.site_of(start)[0]
                unreached[site] = unreached.get(site, 0) + size
        self.result.unreached = sorted(unreached.items(), key=lambda item: -item[1])

    def path_through_most(self, storages: List[Tuple[int, _Found]]) -> str:
        """The chain to one of a holder's storages through what holds most of their bytes: from the root, on
        at each step to the branch that holds the most, until a storage holds as much as any branch past it.
        A search that keeps every trial's model in a list is told through the list, not through the name
        of the newest model, however much larger that one is than each of the others. PyTorch's holders
        named up front have no chain: their largest storage's path."""
        if any(found.step < 0 for _, found in storages):
            return max(storages, key=lambda storage: storage[0])[1].path
        below: Dict[int, int] = {}  # by step: the bytes of the storages reached through it
        branches: Dict[int, List[int]] = {}  # by step (-1 above the roots): the steps the chains went on to
        ends: Dict[int, int] = {}  # by step: the bytes of the storage found there
        for size, found in storages:
            parent = -1
            for step in self.chains.steps_to(found.step):
                if step not in below:
                    below[step] = 0
                    branches.setdefault(parent, []).append(step)
                below[step] += size
                parent = step
            ends[found.step] = size
        step = -1
        while step not in ends or any(below[branch] > ends[step] for branch in branches.get(step, ())):
            step = max(branches[step], key=lambda branch: below[branch])
        return self.chains.text(step)

    def holder_of(
        self, holders: Dict[Tuple[int, int], Holder], root: int, chain: Chain
    ) -> Tuple[Tuple[int, int], Holder]:
        """The holder of a storage that `chain` reached from `root`: the root, or the attribute of an object
        of the program's own class that the chain went through, named by its class and reached from the root."""
        attribute = chain.attribute
        key = (root, id(self.steps[attribute][0]) if attribute >= 0 else 0)
        holder = holders.get(key)
        if holder is None:
            description, kind = self.roots[root]
            named = self.chains.attribute_name(chain.written, attribute) if attribute >= 0 else ""
            if named:
                reached = _objects.describe(self.steps[attribute][0])
                description = "`%s`, %s, reached from %s" % (named, reached, description)
            holder = holders[key] = Holder(root=description, kind=kind, attribute=named)
        return key, holder
