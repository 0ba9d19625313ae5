"""``%gpuleak``: the GPU memory of this kernel now, from its own trace (``gpuleak-report`` on it).

``%gpuleak`` prints what is reserved and allocated now and at the peak, how much that changed since the
previous cell began, and the sites that hold the most live memory; ``%gpuleak report`` shows the whole
report of the trace so far: in a notebook its HTML page (timeline, flame graph), in a terminal its text;
``%gpuleak why`` what keeps that memory alive (:func:`gpuleak.why`); ``%gpuleak watch`` what ``gpuleak
watch`` shows (each device's memory now and over the last minute, the lines growing now, with when the
device is full at that rate): in a notebook redrawn about once a second while later cells run, until
``%gpuleak watch stop``; in a terminal IPython one frame. What it prints is what the user asked for, so it
goes to stdout.
"""

from __future__ import annotations

import html

from . import _native, _report, _watch, _why
from ._formatting import format_bytes, frame_text, printable

# The page in the notebook: a frame of its own, whose scripts run apart from the notebook's (no
# allow-same-origin: an opaque origin that reaches neither the notebook's page nor its cookies).
PAGE_FRAME = '<iframe srcdoc="%s" sandbox="allow-scripts" style="width: 100%%; height: 900px; border: 0"></iframe>'

TOP_SITES = 5
USAGE = (
    "usage: %gpuleak (the live state), %gpuleak report (the full report of this kernel's trace), "
    "%gpuleak why (what keeps its GPU memory alive), %gpuleak watch (what grows now, live in a notebook) or "
    "%gpuleak watch stop"
)


def site_text(site: dict) -> str:
    """'3.0 MiB in 1 allocation: <the program's innermost frame>, from <the outermost cell's frame>'."""
    frames = site.get("frames") or []
    python = [frame for frame in frames if frame.get("python")]
    # The program's own innermost frame, not a library's (IPython's, torch's), names the site.
    own = [frame for frame in python if frame.get("program")]
    innermost = (own or python or frames or [{}])[0]
    where = frame_text(innermost)
    # A function defined in one cell and called from another: the calling cell is what the user ran.
    cells = [frame for frame in python if frame.get("source_name")]
    if cells and cells[-1] is not innermost:
        where += ", from " + frame_text(cells[-1])
    count = site.get("count") or 0
    return "%s in %d allocation%s: %s" % (
        format_bytes(site.get("bytes")),
        count,
        "" if count == 1 else "s",
        where,
    )


def reserved_at(timeline, t_s) -> int:
    """Reserved bytes at time t_s: the last timeline point at or before it (0 before the first)."""
    reserved = 0
    for point in timeline:
        if point.get("t_s", 0) > t_s:
            break
        reserved = point.get("reserved_bytes") or 0
    return reserved


def growth_line(process: dict):
    """'+512.0 MiB reserved since cell [4] began', from the cell markers; None before a second cell."""
    cells = [marker for marker in process.get("markers") or [] if marker.get("label", "").startswith("cell [")]
    if len(cells) < 2:
        return None
    previous = cells[-2]
    summary = process.get("summary") or {}
    before = reserved_at(process.get("timeline") or [], previous.get("t_s", 0))
    change = (summary.get("final_reserved_bytes") or 0) - before
    sign = "+" if change >= 0 else "-"
    return "%s%s reserved since %s began" % (sign, format_bytes(abs(change)), previous["label"])


def live_state(process: dict, trace: str) -> str:
    summary = process.get("summary") or {}
    lines = [
        "gpuleak: pid %s, trace %s" % (process.get("pid"), trace),
        "  reserved %s now (peak %s), allocated %s now (peak %s)"
        % tuple(
            format_bytes(summary.get(key))
            for key in (
                "final_reserved_bytes",
                "peak_reserved_bytes",
                "final_allocated_bytes",
                "peak_allocated_bytes",
            )
        ),
    ]
    # What makes those figures less than exact, beside them.
    lines += ["  not exact: " + note for note in (summary.get("exactness") or {}).get("notes") or []]
    growth = growth_line(process)
    if growth:
        lines.append("  " + growth)
    # A caching allocator's segments hold the program's blocks and its cache: what the program holds is
    # the blocks, and the segments' sites would list the same bytes again.
    sites = [site for site in process.get("leaks") or [] if not site.get("segments")][:TOP_SITES]
    if sites:
        lines.append("  held by the program now, by site:")
        lines += ["    " + site_text(site) for site in sites]
    else:
        lines.append("  nothing held by the program")
    if summary.get("allocator_reports_blocks"):
        cached = (summary.get("final_reserved_bytes") or 0) - (summary.get("final_allocated_bytes") or 0)
        lines.append("  the caching allocator holds %s more, cached for reuse" % format_bytes(max(cached, 0)))
    # Files, functions, cells' lines and labels come from the program: each stays on its line.
    return "\n".join(printable(line) for line in lines)


def shows_html() -> bool:
    """Whether this IPython sends its output to a front end that may show HTML (a kernel's: Jupyter, VS
    Code), rather than to a terminal."""
    try:
        from IPython import get_ipython
    except ImportError:
        return False
    shell = get_ipython()
    return shell is not None and type(shell).__name__ == "ZMQInteractiveShell"


def show_report(text: str, page) -> None:
    """The text report, and in a front end that shows HTML the page instead (IPython picks)."""
    try:
        from IPython.display import display
    except ImportError:
        display = None
    if page is None or display is None:
        print(text)
        return
    display({"text/plain": text, "text/html": PAGE_FRAME % html.escape(page, quote=True)}, raw=True)


def gpuleak_magic(line: str) -> None:
    argument = line.strip()
    argument = " ".join(argument.split())
    if argument not in ("", "report", "why", "watch", "watch stop"):
        print(USAGE)
        return
    if argument == "why":
        print(_why.why())
        return
    if argument == "watch stop":
        if not _watch.stop():
            print("gpuleak: no watch to stop")
        return
    trace = _native.trace_path()
    if trace is None:
        print("gpuleak: not recording: libgpuleak.so is not loaded in this kernel")
        return
    if argument == "watch" and shows_html():
        why = _watch.start(trace)
        if why:
            print("gpuleak: cannot watch: " + why)
        return
    if argument == "watch":
        frame, why = _report.run_report_format(trace, "watch")
        print(frame.rstrip("\n") if frame is not None else "gpuleak: no frame: " + why)
        return
    if argument == "report":
        text, why = _report.run_report_as(trace, "text/plain")
        if text is None:
            print("gpuleak: no report: " + why)
            return
        show_report(text, _report.run_report_as(trace, "text/html")[0] if shows_html() else None)
        return
    document, why = _report.run_report(trace)
    process = _report.process_entry(document, None, trace)
    if process is None:
        print("gpuleak: no report: " + (why or "the report has no entry for this kernel"))
        return
    print(live_state(process, trace))
