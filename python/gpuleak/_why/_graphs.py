"""The autograd graphs of the tensors a search meets: read node by node (what each node saved, which nodes
it leads to), and told by the forward passes they join and whether backward() already ran through them."""

from __future__ import annotations

import time
from typing import Dict, List, Set, Tuple

# How often the search looks at the clock: every so many objects walked, or graph nodes read.
CLOCK_EVERY = 512
# The autograd nodes a search reads to tell what kept tensors' graphs hold, in all: past them, the rest of
# the graphs are not told.
GRAPH_NODES = 200_000

# What an autograd node saved: nothing, tensors, or tensors that backward() freed.
NOTHING, SAVED, FREED = range(3)


class Graphs:
    """The autograd graphs of the tensors one root keeps, read into one set of nodes: each node once, its
    wrapper kept alive while the search runs, so that its id is its own."""

    def __init__(self):
        self.nodes: List[object] = []
        self.index: Dict[int, int] = {}
        self.children: List[List[int]] = []  # of each node read, by index
        self.saved: List[int] = []  # of each node read: NOTHING, SAVED or FREED
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
            if self.saved[node] != NOTHING:
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
        spent_groups = {find(node) for node in below if self.saved[node] == FREED}
        groups = {find(node) for node in first}
        joined, tensor, step = max(
            (({find(node) for node in self.first_of([node])}, tensor, step) for node, tensor, step in
             self.tensors[: self.TENSORS_WEIGHED]),
            key=lambda entry: len(entry[0]),
        )
        return len(groups - spent_groups), len(groups & spent_groups), tensor, step, len(joined), len(joined & spent_groups)


class GraphReader:
    """Reads the graphs of the tensors one search meets into their roots' Graphs, GRAPH_NODES nodes in all
    and none past the search's deadline."""

    def __init__(self, torch, deadline: float):
        self.torch = torch
        self.deadline = deadline
        self.by_root: Dict[int, Graphs] = {}
        self.nodes_left = GRAPH_NODES
        self.node_attributes: Dict[type, Tuple[List[str], bool]] = {}

    def read(self, tensor, root: int, step: int) -> None:
        """Adds the graph of `tensor`, reached from `root` at the search's step `step`, to the root's graphs."""
        try:
            node = tensor.grad_fn
        except RuntimeError:
            return
        if node is None:
            return
        graphs = self.by_root.setdefault(root, Graphs())
        graphs.tensors.append((graphs.add(node), tensor, step))
        while graphs.unread < len(graphs.nodes):
            if self.nodes_left <= 0 or (self.nodes_left % CLOCK_EVERY == 0 and time.monotonic() > self.deadline):
                self.nodes_left = 0
                graphs.cut = True
                return
            self.nodes_left -= 1
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
        state = NOTHING
        for name in self.attributes_of(node)[0]:
            try:
                value = getattr(node, name)
            except RuntimeError as error:
                # "... directly access saved tensors after they have already been freed ...", not another
                # error (a saved tensor changed in place since).
                if "freed" in str(error):
                    return FREED
                continue
            except AttributeError:
                continue
            values = value if issubclass(type(value), (tuple, list)) else (value,)
            if any(issubclass(type(item), self.torch.Tensor) for item in values):
                state = SAVED
        return state
