#!/usr/bin/env python3
"""Writes the tables of the simulated device's stand-ins for NVIDIA's CUDA libraries, one row per
function with its C prototype:

    simdevice/blas_entry_points.def    libcublas.so.13 and libcublasLt.so.13, which are simulated
                                             (and built again as .so.12, for TensorFlow)
    simdevice/refused/<lib>.def        libcudnn.so.9, libcufft.so.12, libcusolver.so.12,
                                             libcusparse.so.12 and libnccl.so.2, which refuse every call
                                             (cuFFT and cuSOLVER built again as .so.11, for TensorFlow)

Each library's list is what PyTorch's libraries import from it (their undefined dynamic symbols at the
library's version node, or for NCCL, which has none, by name), plus the few calls a program other than
PyTorch makes first (EXTRA). Each prototype is copied from the CUDA toolkit's own headers, so that the
stand-ins take exactly the real parameter lists: blas_abi_check.cpp compares the BLAS rows with those
headers at every build where they are installed, and the refusing stand-ins are compiled against them.

The files are committed, so that building the simulated BLAS needs neither PyTorch nor the toolkit.
Rerun this after scripts/setup-torch.sh pins another torch or the toolkit changes:

    scripts/gen_stand_in_entry_points.py [--torch-python PYTHON] [--cuda-include DIR]
"""

import argparse
import re
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SIMDEVICE = ROOT / "simdevice"


@dataclass
class Library:
    key: str  # the table's `lib` column
    soname: str
    headers: list
    versioned: bool = True
    prefix: str = ""  # for an unversioned library: what its functions' names start with
    extra: list = field(default_factory=list)
    table: str = ""  # the refusing stand-in's file under simdevice/refused


BLAS = [
    # Version queries, status texts and cuBLASLt's own handles, which any cuBLAS program calls.
    Library("CUBLAS", "libcublas.so.13", ["cublas_api.h"],
            extra=["cublasGetVersion_v2", "cublasGetProperty", "cublasGetStatusName", "cublasGetStatusString",
                   "cublasGetStream_v2"]),
    # XLA reads its descriptors back (the Get rows).
    Library("CUBLASLT", "libcublasLt.so.13", ["cublasLt.h"],
            extra=["cublasLtCreate", "cublasLtDestroy", "cublasLtGetProperty", "cublasLtMatmulDescGetAttribute",
                   "cublasLtMatrixLayoutGetAttribute", "cublasLtMatmulPreferenceGetAttribute"]),
]
REFUSED = [
    Library("CUDNN", "libcudnn.so.9", ["cudnn_graph.h", "cudnn_ops.h", "cudnn_cnn.h", "cudnn_adv.h"], table="cudnn"),
    Library("CUFFT", "libcufft.so.12", ["cufft.h", "cufftXt.h"], extra=["cufftGetVersion", "cufftGetProperty"],
            table="cufft"),
    # JAX's CUDA plugin checks these versions before it starts (jax_cuda13_plugin._versions).
    Library("CUSOLVER", "libcusolver.so.12", ["cusolver_common.h", "cusolverDn.h"],
            extra=["cusolverGetProperty", "cusolverGetVersion"], table="cusolver"),
    Library("CUSPARSE", "libcusparse.so.12", ["cusparse.h"], extra=["cusparseGetProperty"], table="cusparse"),
    Library("NCCL", "libnccl.so.2", ["nccl.h", "nccl_device/core.h"], versioned=False, prefix="nccl", table="nccl"),
]

# Parameters that are sizes: negative values are CUBLAS_STATUS_INVALID_VALUE in every cuBLAS routine.
SIZE_PARAMETERS = ("m", "n", "k", "kl", "ku", "batchCount", "batchSize")
GEMM_PARAMETERS = ("handle", "transa", "transb", "m", "n", "k", "lda", "ldb", "ldc")
# The batched solvers (LU, QR, least squares) report each problem's outcome in these: a computation that
# computes nothing cannot, so the simulated cuBLAS refuses them as the libraries of refused/ are.
OUTCOME_PARAMETERS = ("info", "infoArray", "devInfoArray")
# Calls on a cuBLAS handle that are not computations: its modes, stream and workspace, written by hand.
HANDLE_CALL = re.compile(r"^cublas(Lt)?(Create|Destroy|Set|Get)")
# What a refusing stand-in still answers, written by hand: the library's version, its error texts, and
# cuDNN's handle, which TensorFlow and XLA create at their first compiled step whatever the model, and
# without which they fail (what would run on it is refused).
ANSWERED = re.compile(
    r"(Get(Version|Property|CudartVersion)|Get\w*(ErrorString|LastError|StatusString|StatusName))$|^cudnn(Create|Destroy|SetStream|GetStream)$"
)
# Releasing what was never made succeeds, as PyTorch's destructors and shutdown release whatever a
# program asked for, also after the request was refused (and some of them end the process when that fails).
RELEASED = re.compile(r"(Destroy\w*|Abort|CommFinalize|Deregister|Free|GroupStart|GroupEnd)$")
# Decorations between a declaration's words: calling conventions, linkage, and deprecation marks.
DECORATION = re.compile(r"\b[A-Z]+API\b|\bNCCL_EXTERN_C\b|\b__host__\b|\b[A-Z]+_DEPRECATED\w*(\s*\([^()]*\))?")

BLAS_HEADER = """\
// Generated by scripts/gen_stand_in_entry_points.py from the imports of torch {torch} and the headers of
// cuBLAS {version}; do not edit. The functions the simulated libcublas.so.13 and libcublasLt.so.13
// define, each with its prototype from the toolkit's headers. Define the row macros you need before
// including this file; undefined ones expand to nothing, and all are undefined at its end.
//   GPULEAK_BLAS_OWN(lib, ret, name, params): written by hand
//   GPULEAK_BLAS_GEMM(lib, name, params, handle, transa, transb, m, n, k, lda, ldb, ldc, batch): a
//       matrix product, whose shapes and leading dimensions are checked
//   GPULEAK_BLAS_COMPUTE(lib, name, params, handle, (sizes...)): any other computation on a handle
//   GPULEAK_BLAS_REFUSED(lib, name, params): a batched solver, which reports outcomes it cannot know
// lib is CUBLAS (libcublas.so.13) or CUBLASLT (libcublasLt.so.13).
#ifndef GPULEAK_BLAS_OWN
#define GPULEAK_BLAS_OWN(lib, ret, name, params)
#endif
#ifndef GPULEAK_BLAS_GEMM
#define GPULEAK_BLAS_GEMM(lib, name, params, handle, transa, transb, m, n, k, lda, ldb, ldc, batch)
#endif
#ifndef GPULEAK_BLAS_COMPUTE
#define GPULEAK_BLAS_COMPUTE(lib, name, params, handle, sizes)
#endif
#ifndef GPULEAK_BLAS_REFUSED
#define GPULEAK_BLAS_REFUSED(lib, name, params)
#endif

#define GPULEAK_CUBLAS_VER_MAJOR {major}
#define GPULEAK_CUBLAS_VER_MINOR {minor}
#define GPULEAK_CUBLAS_VER_PATCH {patch}
#define GPULEAK_CUBLAS_VER_BUILD {build}

"""
BLAS_FOOTER = """
#undef GPULEAK_BLAS_OWN
#undef GPULEAK_BLAS_GEMM
#undef GPULEAK_BLAS_COMPUTE
#undef GPULEAK_BLAS_REFUSED
"""

REFUSED_HEADER = """\
// Generated by scripts/gen_stand_in_entry_points.py from the imports of torch {torch} and the CUDA
// toolkit's headers; do not edit. The functions of the stand-in for {soname}, which cannot run on
// the simulated device, each with its prototype from the toolkit's headers (the stand-in is compiled
// against those). Define the row macros you need before including this file; undefined ones expand to
// nothing, and all are undefined at its end.
//   GPULEAK_ANSWERED(ret, name, params): written by hand (the version, error texts, cuDNN's handle)
//   GPULEAK_RELEASED(ret, name, params): releases (nothing, as nothing was made) and succeeds
//   GPULEAK_REFUSED(ret, name, params): fails, saying why
#ifndef GPULEAK_ANSWERED
#define GPULEAK_ANSWERED(ret, name, params)
#endif
#ifndef GPULEAK_RELEASED
#define GPULEAK_RELEASED(ret, name, params)
#endif
#ifndef GPULEAK_REFUSED
#define GPULEAK_REFUSED(ret, name, params)
#endif

"""
REFUSED_FOOTER = """
#undef GPULEAK_ANSWERED
#undef GPULEAK_RELEASED
#undef GPULEAK_REFUSED
"""


def torch_library_directory(python):
    code = "import os, torch; print(os.path.join(os.path.dirname(torch.__file__), 'lib'), torch.__version__)"
    lines = subprocess.run([python, "-c", code], check=True, capture_output=True, text=True).stdout.split()
    return Path(lines[0]), lines[1]


def undefined_symbols(library_directory):
    """(name, version) of every undefined dynamic symbol of PyTorch's shared libraries."""
    found = set()
    for library in sorted(library_directory.glob("lib*.so*")):
        listing = subprocess.run(
            ["nm", "-D", "--undefined-only", str(library)], check=True, capture_output=True, text=True
        ).stdout
        for line in listing.splitlines():
            name, _, version = line.split()[-1].partition("@")
            found.add((name, version.lstrip("@")))
    return found


def imports(symbols, library):
    if library.versioned:
        return {name for name, version in symbols if version == library.soname}
    return {name for name, version in symbols if not version and name.startswith(library.prefix)}


def declarations(header_text):
    """{name: (return type, parameter list)} of every function the header declares."""
    text = re.sub(r"/\*.*?\*/", " ", header_text, flags=re.S)
    text = re.sub(r"//[^\n]*", " ", text)
    text = re.sub(r"^\s*#[^\n]*", " ", text, flags=re.M)
    text = DECORATION.sub(" ", text)
    found = {}
    for statement in text.split(";"):
        statement = " ".join(statement.split())
        match = re.fullmatch(r"(?:.*[{}] )?(?:extern \"C\" )?([\w ]+?\**) ?\b(\w+) ?\((.*)\)", statement)
        # The first declaration is the library's; C++ wrappers of the same name may follow it.
        if match and not re.match(r"(typedef|return|static)\b", match.group(1)) and match.group(2) not in found:
            return_type = re.sub(r" ?\*", "*", match.group(1).strip())
            parameters = re.sub(r" ?\* ?", "* ", match.group(3)).replace("* ,", "*,").replace("* )", "*)")
            found[match.group(2)] = (return_type, parameters.strip())
    return found


def parameter_names(parameters):
    names = []
    for parameter in parameters.split(","):
        match = re.search(r"(\w+)\s*(\[\])?\s*$", parameter.strip())
        if match is None or parameter.strip() in ("void", ""):
            return []
        names.append(match.group(1))
    return names


def wrapped(text, width=110, indent="    "):
    """`text` broken after commas into lines of at most `width` columns (clang-format takes the
    pointers in macro arguments for multiplications)."""
    lines, line = [], ""
    for piece in re.split(r"(?<=,) ", text):
        if line and len(line) + 1 + len(piece) > width:
            lines.append(line)
            line = indent + piece
        else:
            line = f"{line} {piece}" if line else piece
    return "\n".join(lines + [line])


def blas_row(library, name, return_type, parameters):
    params = f"({parameters})"
    names = parameter_names(parameters)
    computes = return_type == "cublasStatus_t" and names[:1] == ["handle"] and not HANDLE_CALL.match(name)
    if library.key == "CUBLASLT" or not computes:
        return wrapped(f"GPULEAK_BLAS_OWN({library.key}, {return_type}, {name}, {params})")
    if any(parameter in names for parameter in OUTCOME_PARAMETERS):
        return wrapped(f"GPULEAK_BLAS_REFUSED({library.key}, {name}, {params})")
    if all(parameter in names for parameter in GEMM_PARAMETERS):
        batch = "batchCount" if "batchCount" in names else "1"
        return wrapped(f"GPULEAK_BLAS_GEMM({library.key}, {name}, {params}, handle, transa, transb, m, n, k, lda, ldb, ldc, {batch})")
    sizes = ", ".join(parameter for parameter in names if parameter in SIZE_PARAMETERS)
    return wrapped(f"GPULEAK_BLAS_COMPUTE({library.key}, {name}, {params}, handle, ({sizes}))")


def refused_row(library, name, return_type, parameters):
    kind = "ANSWERED" if ANSWERED.search(name) else "RELEASED" if RELEASED.search(name) else "REFUSED"
    return wrapped(f"GPULEAK_{kind}({return_type}, {name}, ({parameters}))")


def rows_of(library, symbols, include, make_row):
    known = {}
    for header in library.headers:
        for name, declaration in declarations((include / header).read_text()).items():
            known.setdefault(name, declaration)
    names = imports(symbols, library) | set(library.extra)
    missing = sorted(name for name in names if name not in known)
    if missing:
        sys.exit(f"gen_stand_in_entry_points: {', '.join(library.headers)} declare no {', '.join(missing)}")
    rule = f"// ---- {library.soname} " + "-" * (100 - len(library.soname) - 9)
    return [rule] + [make_row(library, name, *known[name]) for name in sorted(names)]


def cublas_version(include):
    header = (include / "cublas_api.h").read_text()
    parts = {}
    for part in ("MAJOR", "MINOR", "PATCH", "BUILD"):
        match = re.search(rf"#define CUBLAS_VER_{part} (\d+)", header)
        if match is None:
            sys.exit(f"gen_stand_in_entry_points: no CUBLAS_VER_{part} in cublas_api.h")
        parts[part.lower()] = int(match.group(1))
    return parts


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--torch-python", help="the interpreter of the PyTorch environment (default: scripts/setup-torch.sh's)")
    parser.add_argument("--cuda-include", type=Path, default=Path("/usr/local/cuda/include"))
    arguments = parser.parse_args()

    python = arguments.torch_python
    if python is None:
        environment = subprocess.run([str(ROOT / "scripts" / "setup-torch.sh")], check=True, capture_output=True, text=True)
        python = str(Path(environment.stdout.strip()) / "bin" / "python")
    library_directory, torch_version = torch_library_directory(python)
    symbols = undefined_symbols(library_directory)
    include = arguments.cuda_include

    # Every table is made before any is written: a library whose headers lack a function leaves them all
    # as they were.
    version = cublas_version(include)
    blas = BLAS_HEADER.format(torch=torch_version, version="{major}.{minor}.{patch}.{build}".format(**version), **version)
    rows = []
    for library in BLAS:
        rows += rows_of(library, symbols, include, blas_row) + [""]
    tables = {SIMDEVICE / "blas_entry_points.def": blas + "\n".join(rows).rstrip("\n") + "\n" + BLAS_FOOTER}
    for library in REFUSED:
        header = REFUSED_HEADER.format(torch=torch_version, soname=library.soname)
        rows = rows_of(library, symbols, include, refused_row)
        tables[SIMDEVICE / "refused" / f"{library.table}.def"] = header + "\n".join(rows) + "\n" + REFUSED_FOOTER
    for path, text in tables.items():
        path.write_text(text)
    print("gen_stand_in_entry_points: wrote", ", ".join(str(path.relative_to(ROOT)) for path in tables))

if __name__ == "__main__":
    main()
