"""How the package writes what it shows: byte counts, a report's frames, and a trace's strings made safe for
a terminal. gpuleak-report's text is the model: what the package prints of a report reads as the report would."""

from __future__ import annotations

# Past ASCII, what changes how a terminal shows what follows: C1 controls (8-bit CSI and OSC among them),
# the line and paragraph separators and the bidirectional marks, embeddings, overrides and isolates.
_HIDDEN_CONTROLS = frozenset(
    [*range(0x80, 0xA0), 0x061C, 0x200E, 0x200F, *range(0x2028, 0x202F), *range(0x2066, 0x206A)]
)
_NAMED_ESCAPES = {"\n": "\\n", "\t": "\\t", "\r": "\\r"}


def printable(text: str) -> str:
    """`text` as one line that drives no terminal, as gpuleak-report's text shows a trace's strings: C0
    and C1 controls, DEL, the line separators and the bidirectional controls escaped (`\\n`, `\\x1b`,
    `\\u202e`), and the bytes a file name held that were not UTF-8 (os.fsdecode's surrogates) as `\\xff`."""
    out = []
    for character in text:
        code = ord(character)
        if character in _NAMED_ESCAPES:
            out.append(_NAMED_ESCAPES[character])
        elif code < 0x20 or code == 0x7F:
            out.append("\\x%02x" % code)
        elif 0xDC80 <= code <= 0xDCFF:
            out.append("\\x%02x" % (code - 0xDC00))
        elif code in _HIDDEN_CONTROLS or 0xD800 <= code <= 0xDFFF:
            out.append("\\u%04x" % code)
        else:
            out.append(character)
    return "".join(out)


def format_bytes(count) -> str:
    if count is None:
        return "?"
    value = float(count)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(value) < 1024 or unit == "TiB":
            return "%d B" % count if unit == "B" else "%.1f %s" % (value, unit)
        value /= 1024
    return "%d B" % count  # not reached


def frame_text(frame: dict) -> str:
    """How a site's frame reads: a cell's line with its text, a file's line, or a native function."""
    if frame.get("source_name"):
        where = frame["source_name"]
        if frame.get("line"):
            where += ", line %d" % frame["line"]
        if frame.get("source_line"):
            where += " (`%s`)" % frame["source_line"]
        return where
    if frame.get("python"):
        return "%s:%s in %s" % (frame.get("file") or "?", frame.get("line") or "?", frame.get("function") or "?")
    return frame.get("function") or "%s+%#x" % (frame.get("module") or "?", frame.get("module_offset") or 0)


def article(noun: str) -> str:
    return ("an " if noun[:1].lower() in "aeiou" else "a ") + noun
