"""What a search looks for: the sites of this process's trace that hold live memory (``gpuleak-report
--live-blocks`` on it), its growing sites first, and where each of their blocks is."""

from __future__ import annotations

import bisect
from typing import Dict, List, Optional, Tuple

from .. import _report
from .._formatting import frame_text
from ._answer import Answer, Site

# The sites searched for: the report's growing sites, then its largest, that the program holds (not an
# allocator's segments).
SITES = 10


class BlockIndex:
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


def read_sites(result: Answer, timeout_s: float) -> BlockIndex:
    """The live blocks of the sites to search for, read from the report of `result`'s trace (given
    `timeout_s`), which are put in `result.sites` with what the trace counts without an address; or, where
    there is no report of this process, why not in `result.problem`."""
    document, problem = _report.run_report(
        result.trace,
        # Past the largest: a growing site may be small beside a model's parameters and workspaces.
        ["--live-blocks", "--top", str(SITES * 10)],
        timeout_s,
    )
    process = _report.process_entry(document, result.pid, result.trace)
    blocks = BlockIndex()
    if process is None:
        result.problem = problem or "the report has no entry for this process"
        return blocks
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
    return blocks


def _site_where(site: dict) -> str:
    """The site as the report names it: a notebook cell's line with its text, else the report's words."""
    python = [frame for frame in site.get("frames") or [] if frame.get("python")]
    cells = [frame for frame in python if frame.get("source_name")]
    return frame_text(cells[0]) if cells else site.get("where") or "an unknown site"
