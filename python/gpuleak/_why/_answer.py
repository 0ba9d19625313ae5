"""What a search found: the sites it looked for, the holders of their memory, and what it could not reach.
Data only: :class:`gpuleak.Why` says it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple

# The passes a holder's graphs must join for gpuleak-report to call them a leak: its kMinPasses and
# kMinSpentPasses (process_model.h), which say why; the advice about running totals follows the second.
MIN_PASSES = 3
MIN_SPENT_PASSES = 16
# What PyTorch's own holders are reached through: such a holder is named by its model or optimizer.
OWN_FACTS = ("parameter", "buffer", "gradient", "optimizer state")


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
    # The chain through what holds most of its bytes, to the largest storage there, as an expression:
    # "losses[59].grad_fn...", "f_locals['results'][4][2]..." (a list of models, not the newest model's name).
    path: str = ""
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
class Answer:
    """The fields of :class:`gpuleak.Why`: what one search found, or why there is nothing."""

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


def add_once(items: List[str], item: str) -> None:
    """Appends `item` unless `items` has it: a holder's facts, each once, in the order the chains met them."""
    if item not in items:
        items.append(item)
