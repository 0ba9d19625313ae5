"""The record of an answer in this process's trace (gpuleak_retainers), which gpuleak-report reads: a JSON
document within what the C side keeps."""

from __future__ import annotations

import json
from typing import Optional

from .. import _native
from ._answer import MIN_PASSES, MIN_SPENT_PASSES, Answer
from ._text import holder_advice, own_text

# A chain, a root's words or a problem longer than this is cut in the record (the text of the answer shows it whole).
_RECORD_CHARACTERS = 1000


def _cut(text: str) -> str:
    return text[:_RECORD_CHARACTERS]


def document(result: Answer, moment: str, device: Optional[int] = None) -> bytes:
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
            "own": own_text(holder),
            "owner": holder.owner,
            "models": holder.models,
            "advice": holder_advice(holder),
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


def record(result: Answer, label: str, moment: str, device: Optional[int] = None) -> None:
    """Records `result` in this process's trace under `label`; nothing where there is no trace."""
    if result.trace is not None:
        _native.retainers(label, document(result, moment, device))
