"""What :func:`gpuleak.why` says: for each holder, how much it holds, made where, through what, and what to
change; then what no chain reached. Also the words the trace's record keeps of each holder."""

from __future__ import annotations

import sys
from typing import List

from .._formatting import article, format_bytes, printable
from ._answer import MIN_SPENT_PASSES, Answer, Graph, Holder, add_once

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


def holder_advice(holder: Holder) -> List[str]:
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
            add_once(through, "autograd graph" if holder.graph.passes else "spent graph")
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
    held = ", its ".join("`%s` %s" % (name, format_bytes(size)) for name, size in fields[:4])
    spelled = "[%r]" if holder.output == "dict of outputs" else ".%s"
    cures: List[str] = []
    for name in ["loss"] + [name for name, _ in fields]:
        cure = _FIELD_ADVICE.get(name, "").replace("{%s}" % name, spelled % name)
        if cure:
            add_once(cures, cure)
    return "each step's %s is kept whole: its %s. Keep only what is needed of it: %s" % (
        holder.output,
        held,
        ", ".join(cures[:-1]) + (" and " if len(cures) > 1 else "") + cures[-1],
    )


def graph_text(graph: Graph) -> str:
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


def own_text(holder: Holder) -> str:
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
        return "the state of %s optimizer" % article(holder.owner)
    kinds = [_OWN[fact] for fact in holder.through if fact in _OWN]
    return "the %s of %s" % (" and ".join(kinds), article(holder.owner)) if kinds else ""


def _sites_text(result: Answer, sites: List[int]) -> str:
    where: List[str] = []
    for site in sites:
        add_once(where, result.sites[site].where)
    return ", ".join(where[:3]) + (" and %d more sites" % (len(where) - 3) if len(where) > 3 else "")


def answer_text(result: Answer) -> str:
    if result.problem:
        return printable("gpuleak: why: " + result.problem)
    if not result.sites:
        return "gpuleak: why: the program holds no GPU memory that the trace saw it allocate"
    lines = ["gpuleak: what keeps this process's GPU memory alive (pid %d)" % result.pid]
    for holder in result.holders:
        if not holder.sites:
            lines.append("  %s: %s" % (holder.root, graph_text(holder.graph)))
            lines += ["    " + advice for advice in holder_advice(holder)]
            continue
        own = own_text(holder)
        # What a PyTorch user calls them; other libraries' are arrays.
        noun = "tensor" if "torch" in sys.modules else "array"
        lines.append(
            "  %s in %d %s%s made at %s: held by %s%s"
            % (
                format_bytes(holder.bytes),
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
            lines.append("    %s" % graph_text(holder.graph))
        lines += ["    " + advice for advice in holder_advice(holder)]
    for site, size in result.unreached:
        where = result.sites[site].where
        if result.sites[site].purpose and not result.stopped:
            # The report's words for the site end with what the library keeps it for.
            lines.append("  %s made at %s: not the program's to free" % (format_bytes(size), where))
            continue
        lines.append(
            "  %s made at %s: not reached from the program's objects%s"
            % (
                format_bytes(size),
                where,
                " (the search stopped after %.1f s and %d objects)" % (result.seconds, result.objects_searched)
                if result.stopped
                else " (held by C++ code, such as a library's workspace or cache, or by a bare pointer)",
            )
        )
    for site, size in result.unplaced:
        lines.append(
            "  %s made at %s: counted by site only in the trace (its live slots ran out: no addresses), so not "
            "searched for" % (format_bytes(size), result.sites[site].where)
        )
    return "\n".join(printable(line) for line in lines)
