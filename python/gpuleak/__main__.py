"""``python -m gpuleak ...``: the ``gpuleak`` program of this installation (``run``, ``kernel``,
``torch-adapter``), for an environment whose ``bin/`` is not on PATH."""

import os
import shutil
import sys
from pathlib import Path


def _program():
    # Installed, this file is <prefix>/share/gpuleak/python/gpuleak/__main__.py.
    parents = Path(__file__).resolve().parents
    if len(parents) > 4:
        installed = parents[4] / "bin" / "gpuleak"
        if installed.is_file() and os.access(installed, os.X_OK):
            return str(installed)
    return shutil.which("gpuleak")


def main():
    program = _program()
    if program is None:
        sys.exit("gpuleak: cannot find the gpuleak program beside this package or on PATH")
    os.execv(program, [program, *sys.argv[1:]])


if __name__ == "__main__":
    main()
