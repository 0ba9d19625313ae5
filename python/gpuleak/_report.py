"""Running ``gpuleak-report --format json`` on a trace, and the one-line summary of its answer.

gpuleak-report is looked for, in this order: the file named by the environment variable
``GPULEAK_REPORT``; beside the loaded libgpuleak.so (the same directory, ``../bin``, or ``../analyzer``
as in a build tree), which is the version that wrote the trace; then ``gpuleak-report`` on ``PATH``.
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import subprocess
from typing import Optional, Tuple

from . import _native
from ._formatting import format_bytes, printable

REPORT_TIMEOUT_S = 600


def _executable(path: str) -> bool:
    return os.path.isfile(path) and os.access(path, os.X_OK)


def find_program(name: str, variable: str, build_folder: str) -> Tuple[Optional[str], str]:
    """(path of gpuleak's program `name`, "") or (None, why it was not found): the file the environment
    variable `variable` names, else beside the loaded libgpuleak.so (the same directory, ``../bin``, or
    ``../<build_folder>`` as in a build tree), else on PATH."""
    named = os.environ.get(variable)
    if named:
        if _executable(named):
            return named, ""
        return None, "%s=%s is not an executable file" % (variable, named)
    library = _native.library_path()
    if library:
        directory = os.path.dirname(library)
        for candidate in (
            os.path.join(directory, name),
            os.path.join(directory, os.pardir, "bin", name),
            os.path.join(directory, os.pardir, build_folder, name),
        ):
            if _executable(candidate):
                return os.path.normpath(candidate), ""
    on_path = shutil.which(name)
    if on_path:
        return on_path, ""
    return None, "%s not found (set %s, or put it on PATH)" % (name, variable)


def find_report() -> Tuple[Optional[str], str]:
    """(path of gpuleak-report, "") or (None, why it was not found)."""
    return find_program("gpuleak-report", "GPULEAK_REPORT", "analyzer")


def environment_without_preload():
    """This environment minus libgpuleak.so in LD_PRELOAD: the report itself is not to be recorded."""
    environment = dict(os.environ)
    preload = environment.get("LD_PRELOAD")
    if preload is not None:
        kept = [entry for entry in preload.replace(":", " ").split() if "gpuleak" not in os.path.basename(entry)]
        if kept:
            environment["LD_PRELOAD"] = " ".join(kept)
        else:
            del environment["LD_PRELOAD"]
    return environment


def _run_report(arguments, timeout_s: float = REPORT_TIMEOUT_S) -> Tuple[Optional[str], str]:
    """(what gpuleak-report printed, "") or (None, why there is nothing)."""
    report, why = find_report()
    if report is None:
        return None, why
    return _run(report, arguments, timeout_s)


def _run(report: str, arguments, timeout_s: float = REPORT_TIMEOUT_S) -> Tuple[Optional[str], str]:
    """(what the gpuleak-report at `report` printed, "") or (None, why there is nothing)."""
    try:
        completed = subprocess.run(
            [report, "--no-color"] + list(arguments),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=environment_without_preload(),
            timeout=timeout_s,
        )
    except (OSError, subprocess.SubprocessError) as error:
        return None, "%s could not be run: %s" % (report, error)
    if completed.returncode != 0:
        message = completed.stderr.decode("utf-8", "replace").strip().splitlines()
        return None, "%s exited with status %d%s" % (
            report,
            completed.returncode,
            (": " + message[-1]) if message else "",
        )
    return completed.stdout.decode("utf-8", "replace"), ""


def run_report(trace: str, options=(), timeout_s: float = REPORT_TIMEOUT_S) -> Tuple[Optional[dict], str]:
    """(parsed JSON document, "") or (None, why there is none); `options`: more of gpuleak-report's."""
    text, why = _run_report(["--format", "json", *options, trace], timeout_s)
    if text is None:
        return None, why
    try:
        return json.loads(text), ""
    except ValueError as error:
        return None, "gpuleak-report printed no valid JSON: %s" % error


# What a gpuleak-report from before --list-formats offered.
_FORMATS_BEFORE_THE_TABLE = [
    {"name": "text", "media_type": "text/plain", "binary": False},
    {"name": "html", "media_type": "text/html", "binary": False},
]


@functools.lru_cache(maxsize=None)
def _formats_of(report: str) -> tuple:
    """The formats of the gpuleak-report at `report`, each {"name", "media_type", "binary", ...}: its own
    table (``--list-formats``, read once), so that what a front end is offered follows the report."""
    text, _ = _run(report, ["--list-formats"])
    try:
        table = json.loads(text) if text is not None else None
    except ValueError:
        table = None
    if not isinstance(table, dict) or table.get("schema") != "gpuleak-formats/1":
        return tuple(_FORMATS_BEFORE_THE_TABLE)
    return tuple(table.get("formats") or [])


def run_report_as(trace: str, media_type: str) -> Tuple[Optional[str], str]:
    """(the report in gpuleak-report's first format of `media_type` that is not binary, "") or (None, why
    there is none)."""
    report, why = find_report()
    if report is None:
        return None, why
    for entry in _formats_of(report):
        if entry.get("media_type") == media_type and not entry.get("binary"):
            return _run(report, ["--format", entry["name"], trace])
    return None, "gpuleak-report has no format of type %s" % media_type


def run_report_format(trace: str, format_name: str) -> Tuple[Optional[str], str]:
    """(the report in gpuleak-report's format `format_name`, "") or (None, why there is none)."""
    return _run_report(["--format", format_name, trace])


def process_entry(document: Optional[dict], pid: Optional[int], trace: Optional[str]) -> Optional[dict]:
    """The entry of ``document["processes"]`` for this pid (or this trace file)."""
    if not document:
        return None
    processes = document.get("processes") or []
    for process in processes:
        if pid is not None and process.get("pid") == pid:
            return process
    if trace is not None:
        wanted = os.path.realpath(trace)
        for process in processes:
            if process.get("trace") and os.path.realpath(process["trace"]) == wanted:
                return process
    return processes[0] if len(processes) == 1 else None


def summary_line(process: dict) -> str:
    """'peak reserved 1.5 GiB, peak allocated 1.2 GiB, 512.0 MiB reserved at the end; leak: ...'"""
    summary = process.get("summary") or {}
    parts = [
        "peak reserved %s" % format_bytes(summary.get("peak_reserved_bytes")),
        "peak allocated %s" % format_bytes(summary.get("peak_allocated_bytes")),
        "%s still reserved at the end" % format_bytes(summary.get("final_reserved_bytes")),
    ]
    failed = summary.get("failed_allocations")
    if failed:
        parts.append("%d failed allocation%s" % (failed, "" if failed == 1 else "s"))
    text = ", ".join(parts)
    diagnosis = process.get("diagnosis") or {}
    if diagnosis.get("kind"):
        detail = " ".join(str(diagnosis.get("text") or "").split())
        if len(detail) > 160:
            detail = detail[:157].rstrip() + "..."
        text += "; %s%s" % (diagnosis["kind"], (": " + detail) if detail else "")
    return printable(text)
