#!/usr/bin/env python3
"""Writes interpose/python/python_offsets_generated.h: the PythonLayout of CPython 3.10, 3.11 and 3.12.

Those versions publish no description of their internal structs, so for each one a small C program is
compiled against that version's own headers (Py_BUILD_CORE, internal headers included) and prints
offsetof()/sizeof() of what the stack walker reads. 3.13 and later describe themselves through
_Py_DebugOffsets at run time and need no entry here.

The header is committed: building gpuleak needs no Python headers. Rerun this after changing
PythonLayout or the fields read, with the CPython versions installed under pyenv:

    scripts/gen_python_offsets.py [--pyenv-root DIR] [--output FILE]

For each minor version the newest installed patch release is used; its number is written into the
header. Internal layouts do not change within a minor version for the fields read here.
"""

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MINOR_VERSIONS = (10, 11, 12)

# The headers each version's program includes, beyond Python.h.
HEADERS = {
    10: ["frameobject.h", "internal/pycore_runtime.h", "internal/pycore_interp.h"],
    11: ["internal/pycore_runtime.h", "internal/pycore_interp.h", "internal/pycore_frame.h"],
    12: ["internal/pycore_runtime.h", "internal/pycore_interp.h", "internal/pycore_frame.h"],
}

# PythonLayout member -> C expression, common to all versions.
COMMON_FIELDS = {
    "runtime_finalizing": "offsetof(_PyRuntimeState, _finalizing)",
    "runtime_interpreters": "offsetof(_PyRuntimeState, interpreters.main)",
    "dict_used": "offsetof(PyDictObject, ma_used)",
    "thread_next": "offsetof(PyThreadState, next)",
    "tuple_size": "offsetof(PyTupleObject, ob_base.ob_size)",
    "tuple_items": "offsetof(PyTupleObject, ob_item)",
    "code_filename": "offsetof(PyCodeObject, co_filename)",
    "code_first_line": "offsetof(PyCodeObject, co_firstlineno)",
    "code_line_table": "offsetof(PyCodeObject, co_linetable)",
    "object_type": "offsetof(PyObject, ob_type)",
    "bytes_size": "offsetof(PyBytesObject, ob_base.ob_size)",
    "bytes_data": "offsetof(PyBytesObject, ob_sval)",
    "unicode_length": "offsetof(PyASCIIObject, length)",
    "unicode_state": "offsetof(PyASCIIObject, state)",
    "unicode_ascii_data": "sizeof(PyASCIIObject)",
    "unicode_compact_data": "sizeof(PyCompactUnicodeObject)",
    "unicode_kind_shift": "state_bit_shift(KIND)",
    "unicode_compact_shift": "state_bit_shift(COMPACT)",
    "unicode_ascii_shift": "state_bit_shift(ASCII)",
}

# 3.10: PyThreadState.frame is the innermost PyFrameObject; f_lasti counts code units. Its code
# objects have co_name only.
FIELDS_3_10 = {
    "thread_frame": "offsetof(PyThreadState, frame)",
    "frame_previous": "offsetof(PyFrameObject, f_back)",
    "frame_code": "offsetof(PyFrameObject, f_code)",
    "frame_instruction": "offsetof(PyFrameObject, f_lasti)",
    "code_qualname": "offsetof(PyCodeObject, co_name)",
    "interpreter_modules": "offsetof(PyInterpreterState, modules)",
    "interpreter_threads": "offsetof(PyInterpreterState, tstate_head)",
    "frame_locals": "offsetof(PyFrameObject, f_localsplus)",
    "code_local_names": "offsetof(PyCodeObject, co_varnames)",
    "long_size": "offsetof(PyLongObject, ob_base.ob_size)",
    "long_digits": "offsetof(PyLongObject, ob_digit)",
}

# 3.11 and 3.12: tstate->cframe->current_frame, a chain of _PyInterpreterFrame through `previous`.
FIELDS_3_11_ON = {
    "thread_frame": "offsetof(PyThreadState, cframe)",
    "cframe_current_frame": "offsetof(_PyCFrame, current_frame)",
    "frame_previous": "offsetof(_PyInterpreterFrame, previous)",
    "frame_code": "offsetof(_PyInterpreterFrame, f_code)",
    "frame_instruction": "offsetof(_PyInterpreterFrame, prev_instr)",
    "frame_owner": "offsetof(_PyInterpreterFrame, owner)",
    "code_qualname": "offsetof(PyCodeObject, co_qualname)",
    "code_bytecode": "offsetof(PyCodeObject, co_code_adaptive)",
    "interpreter_threads": "offsetof(PyInterpreterState, threads.head)",
    "frame_locals": "offsetof(_PyInterpreterFrame, localsplus)",
    "code_local_names": "offsetof(PyCodeObject, co_localsplusnames)",
}

# 3.11: _PyEval_EvalFrameDefault sets is_entry on the frame it starts with; frames it pushes for the
# Python functions it calls inline get is_entry false.
FIELDS_3_11 = {
    **FIELDS_3_11_ON,
    "frame_is_entry": "offsetof(_PyInterpreterFrame, is_entry)",
    "interpreter_modules": "offsetof(PyInterpreterState, modules)",
    "long_size": "offsetof(PyLongObject, ob_base.ob_size)",
    "long_digits": "offsetof(PyLongObject, ob_digit)",
}

# 3.12 pushes a shim frame owned by the C stack when _PyEval_EvalFrameDefault is entered: not Python code,
# and the frame above it is the first that loop ran.
FIELDS_3_12 = {
    **FIELDS_3_11_ON,
    "first_shim_owner": "FRAME_OWNED_BY_CSTACK",
    "interpreter_modules": "offsetof(PyInterpreterState, imports.modules)",
    "long_size": "offsetof(PyLongObject, long_value.lv_tag)",
    "long_digits": "offsetof(PyLongObject, long_value.ob_digit)",
}

# How each version's walk tells a loop entry (PythonLoopEntryKind).
LOOP_ENTRY_KINDS = {10: "every_frame", 11: "is_entry", 12: "above_shim"}

# What the C program checks before printing: the walker reads these with these widths.
ASSERTIONS = {
    10: [
        "sizeof(void*) == 8",
        "sizeof(((PyFrameObject*)0)->f_lasti) == 4",
        "sizeof(((PyCodeObject*)0)->co_firstlineno) == 4",
        "sizeof(((PyASCIIObject*)0)->state) == 4",
        "sizeof(((PyDictObject*)0)->ma_used) == 8",
        "sizeof(digit) == 4 && PyLong_SHIFT == 30",
    ],
    12: [
        "sizeof(void*) == 8",
        "sizeof(((_PyInterpreterFrame*)0)->owner) == 1",
        "sizeof(((PyCodeObject*)0)->co_firstlineno) == 4",
        "sizeof(((PyASCIIObject*)0)->state) == 4",
        "sizeof(((PyDictObject*)0)->ma_used) == 8",
        "sizeof(digit) == 4 && PyLong_SHIFT == 30",
    ],
}
ASSERTIONS[11] = ASSERTIONS[12] + ["sizeof(((_PyInterpreterFrame*)0)->is_entry) == 1"]

C_PROGRAM = """\
#define Py_BUILD_CORE 1
#include <Python.h>
{includes}
#include <stddef.h>
#include <stdio.h>
#include <string.h>

enum state_bit {{ KIND, COMPACT, ASCII }};

/* Bit fields have no offsetof: set one to all ones in a zeroed string header and find its lowest bit. */
static unsigned state_bit_shift(enum state_bit bit) {{
    PyASCIIObject text;
    memset(&text, 0, sizeof text);
    switch (bit) {{
    case KIND: text.state.kind = 7; break;
    case COMPACT: text.state.compact = 1; break;
    case ASCII: text.state.ascii = 1; break;
    }}
    unsigned raw;
    memcpy(&raw, (const char*)&text + offsetof(PyASCIIObject, state), sizeof raw);
    return (unsigned)__builtin_ctz(raw);
}}

{assertions}

int main(void) {{
{prints}
    return 0;
}}
"""


def newest_installs(pyenv_root):
    """{minor: (patch version text, install prefix)} of the newest 3.<minor>.<patch> under pyenv."""
    found = {}
    for entry in (pyenv_root / "versions").iterdir():
        match = re.fullmatch(r"3\.(\d+)\.(\d+)", entry.name)
        if not match:
            continue
        minor, patch = int(match.group(1)), int(match.group(2))
        if minor in MINOR_VERSIONS and (minor not in found or patch > found[minor][0]):
            found[minor] = (patch, entry)
    return {minor: (f"3.{minor}.{patch}", prefix) for minor, (patch, prefix) in found.items()}


def fields_of(minor):
    return {**COMMON_FIELDS, **{10: FIELDS_3_10, 11: FIELDS_3_11, 12: FIELDS_3_12}[minor]}


def measure(minor, prefix, compiler, scratch):
    include = prefix / "include" / f"python3.{minor}"
    fields = fields_of(minor)
    source = C_PROGRAM.format(
        includes="\n".join(f"#include <{header}>" for header in HEADERS[minor]),
        assertions="\n".join(f'_Static_assert({check}, "{check}");' for check in ASSERTIONS[minor]),
        prints="\n".join(f'    printf("{name} %zu\\n", (size_t)({expression}));' for name, expression in fields.items()),
    )
    program = scratch / f"layout_3_{minor}"
    source_file = program.with_suffix(".c")
    source_file.write_text(source)
    subprocess.run([compiler, "-std=c11", "-I", str(include), "-o", str(program), str(source_file)], check=True)
    output = subprocess.run([str(program)], check=True, capture_output=True, text=True).stdout
    return dict(line.split() for line in output.splitlines())


def layout_initializer(minor, patch_version, values):
    members = dict(
        values,
        version=f"python_version(3, {minor})",
        loop_entry_kind=f"PythonLoopEntryKind::{LOOP_ENTRY_KINDS[minor]}",
    )
    if minor >= 12:
        members.update(long_size_tagged="true")
    if minor == 10:
        members.update(frame_link="PythonFrameLink::thread_state", instruction_kind="PythonInstructionKind::last_index")
    else:
        members.update(
            frame_link="PythonFrameLink::through_cframe",
            instruction_kind="PythonInstructionKind::code_unit_ptr",
            frame_has_owner="true",
        )
    # Designated initializers must follow the declaration order of PythonLayout.
    order = declaration_order()
    unknown = set(members) - set(order)
    if unknown:
        sys.exit(f"gen_python_offsets: PythonLayout has no member {', '.join(sorted(unknown))}")
    body = "".join(f"        .{name} = {members[name]},\n" for name in order if name in members)
    return f"    // {patch_version}\n    PythonLayout{{\n{body}    }},"


def declaration_order():
    text = (ROOT / "interpose" / "python" / "python_layout.h").read_text()
    struct = text[text.index("struct PythonLayout {") :]
    struct = struct[: struct.index("\n};")]
    return re.findall(r"^\s+\w+ (\w+) = ", struct, flags=re.MULTILINE)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pyenv-root", type=Path, default=default_pyenv_root())
    parser.add_argument("--output", type=Path, default=ROOT / "interpose" / "python" / "python_offsets_generated.h")
    parser.add_argument("--compiler", default=os.environ.get("CC", "cc"))
    arguments = parser.parse_args()

    installs = newest_installs(arguments.pyenv_root)
    missing = [f"3.{minor}" for minor in MINOR_VERSIONS if minor not in installs]
    if missing:
        sys.exit(f"gen_python_offsets: no CPython {', '.join(missing)} under {arguments.pyenv_root}/versions")

    entries = []
    with tempfile.TemporaryDirectory() as scratch:
        for minor in MINOR_VERSIONS:
            patch_version, prefix = installs[minor]
            values = measure(minor, prefix, arguments.compiler, Path(scratch))
            entries.append(layout_initializer(minor, patch_version, values))

    header = (
        "// Generated by scripts/gen_python_offsets.py from each version's own headers: do not edit.\n"
        "// The PythonLayout of the CPython versions that have no _Py_DebugOffsets.\n"
        "#pragma once\n\n"
        '#include "python_layout.h"\n\n'
        "namespace gpuleak {\n\n"
        "inline constexpr PythonLayout kGeneratedPythonLayouts[] = {\n" + "\n".join(entries) + "\n};\n\n"
        "} // namespace gpuleak\n"
    )
    arguments.output.write_text(header)
    clang_format = shutil.which("clang-format")
    if clang_format:
        subprocess.run([clang_format, "-i", f"--style=file:{ROOT / '.clang-format'}", str(arguments.output)], check=True)
    print(f"gen_python_offsets: wrote {arguments.output}")


def default_pyenv_root():
    if "PYENV_ROOT" in os.environ:
        return Path(os.environ["PYENV_ROOT"])
    try:
        return Path(subprocess.run(["pyenv", "root"], check=True, capture_output=True, text=True).stdout.strip())
    except (OSError, subprocess.CalledProcessError):
        return Path.home() / ".pyenv"


if __name__ == "__main__":
    main()
