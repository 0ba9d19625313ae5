"""The chains of a search, read back from its steps: from a root, object by object, to what it reached.
What a chain went through (an autograd graph, a view, a closure, a model's parameters, a model's output),
which object of the program's own class it went through and by which attribute, and how Python spells it."""

from __future__ import annotations

import types
from dataclasses import dataclass
from typing import Dict, List, Optional, Tuple

from . import _objects
from ._answer import OWN_FACTS, add_once

# One step of a chain: the object reached, the index of the step it was reached from (-1 at a root),
# how it was reached (an edge's text, "" to be worked out from the two objects), and the root's index.
Step = Tuple[object, int, str, int]


@dataclass
class Chain:
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


class Chains:
    """The chains of one search, read from its steps (the list its walk goes on adding to): each step leads back
    to its root."""

    def __init__(self, steps: List[Step], torch):
        self.steps = steps
        self.torch = torch
        self.written: Dict[type, bool] = {}

    def attribute_name(self, written: int, attribute: int) -> str:
        """'Classifier.step_losses': the attribute at step `attribute` of the object at step `written`, after
        its class; '' where the chain does not spell it as an attribute."""
        edge = self.text(attribute, after=written)
        if not edge.startswith(".") or not _objects.is_attribute_name(edge[1:]):
            return ""
        return type(self.steps[written][0]).__name__ + edge

    def steps_to(self, index: int) -> List[int]:
        steps = []
        while index >= 0:
            steps.append(index)
            index = self.steps[index][1]
        steps.reverse()
        return steps

    def facts(self, index: int) -> Chain:
        """What the chain to the step at `index` went through; for a module's parameter, the outermost module
        on the chain (the model, not its layer); the innermost object of the program's own class and its
        attribute; a framework's output object and its field."""
        chain = Chain([])
        through = chain.through
        torch = self.torch
        steps = self.steps_to(index)
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
                add_once(through, "autograd graph")
            elif edge.startswith(("._saved_", ".saved_tensors")):
                add_once(through, "saved for backward")
            elif edge == ".grad":
                add_once(through, "gradient")
            elif edge == "._base":
                add_once(through, "view")
            elif issubclass(kind, types.CellType):
                add_once(through, "closure")
            elif issubclass(kind, types.TracebackType):
                add_once(through, "traceback")
            elif _objects.is_pullback(kind):
                add_once(through, "pullback")
            if position + 1 >= len(steps):
                continue
            # What it holds is the next step, or the one after where the next is its attribute dict.
            member = steps[position + 1]
            if position + 2 < len(steps) and _objects.is_attribute_dict(value, self.steps[member][0]):
                member = steps[position + 2]
            if position > 0 and self.written_by_program(kind):
                chain.written, chain.attribute = step, member
            if chain.output is None and _objects.is_model_output(value):
                field = self.text(member, after=step)
                chain.output = ("dict of outputs" if kind is dict else kind.__name__, field.strip(".[]'\""), id(value))
        tensor = self.steps[steps[-1]][0]
        if torch is not None and issubclass(type(tensor), torch.Tensor):
            if issubclass(type(tensor), torch.nn.Parameter):
                add_once(through, "parameter")
            try:
                if tensor.numel() * tensor.element_size() * 2 <= tensor.untyped_storage().nbytes():
                    add_once(through, "view")
            except (RuntimeError, TypeError):
                pass
        if "parameter" not in through:
            chain.owner, chain.module = "", None
        if any(fact in through for fact in OWN_FACTS):
            # PyTorch's own holders are named by their model or optimizer, not by an attribute on the way.
            chain.written = chain.attribute = -1
        else:
            # A dict that the holder is, keyed by what changes every step, is a cache that never drops a value.
            held = self.steps[chain.attribute if chain.attribute >= 0 else steps[0]][0]
            if len(steps) > 1 and _objects.is_cache(held):
                add_once(through, "cache")
        if chain.output is not None:
            add_once(through, "model output")
        return chain

    def written_by_program(self, kind: type) -> bool:
        """Whether `kind` is a class of the program's own (its module is __main__ or a file outside the
        installed packages and the standard library), not a library's: once a class."""
        written = self.written.get(kind)
        if written is None:
            written = self.written[kind] = _objects.written_by_program(kind)
        return written

    def text(self, index: int, after: int = -1) -> str:
        """The chain to the step at `index`, as Python would spell it; from the step `after` on it, only
        what follows that step ('.step_losses' of an object, "['logits']" of a model's output)."""
        text = ""
        attributes = False  # the step before was an object's __dict__: its keys are attributes
        steps = self.steps_to(index)
        if after >= 0:
            steps = steps[steps.index(after) + 1 :]
        for step in steps:
            value, parent, edge, _ = self.steps[step]
            if parent < 0:
                text = edge
                attributes = False
                continue
            edge = edge or _objects.edge(self.steps[parent][0], value)
            if attributes and edge.startswith("['") and _objects.is_attribute_name(edge[2:-2]):
                edge = "." + edge[2:-2]
            text += edge
            attributes = edge == "" and issubclass(type(value), dict)
        return text
