#!/usr/bin/env bash
# What a recorded fork costs the child before its first line runs (a DataLoader's worker, a fork pool's):
# fork() to the child's first write, in a Python process holding 0 and 1 GiB, without gpuleak, under it
# (the child's trace made and its first host sample taken inside fork()), and under it with
# GPULEAK_ALL_PROCESSES=0 (the child not recorded until it uses CUDA). Figures in bench/README.md. A
# benchmark, not a test: it checks nothing about them.
#
# Usage: bench/fork_cost.sh
# Environment: FORKS (forks per configuration, default 100), PYTHON (default python3), BUILD (build tree,
# default build/; built first with scripts/build.sh unless SKIP_BUILD=1).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD:-$root/build}
forks=${FORKS:-100}
python=${PYTHON:-python3}
if [[ ${SKIP_BUILD:-0} != 1 ]]; then
    "$root/scripts/build.sh" "$build" >/dev/null
fi
# A process with the sampler thread forks: Python 3.12+ warns about it, once per fork, in __main__.
export PYTHONWARNINGS=ignore::DeprecationWarning
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "fork_cost: $(nproc) cores, $(uname -r), $("$python" --version 2>&1)"
for mib in 0 1024; do
    "$python" "$root/bench/fork_cost.py" "$mib" "$forks" "without gpuleak"
    LD_PRELOAD="$build/interpose/libgpuleak.so" GPULEAK_OUTPUT="$tmp/trace.%p" GPULEAK_QUIET=1 \
        "$python" "$root/bench/fork_cost.py" "$mib" "$forks" "gpuleak, children recorded"
    LD_PRELOAD="$build/interpose/libgpuleak.so" GPULEAK_OUTPUT="$tmp/trace.%p" GPULEAK_QUIET=1 \
        GPULEAK_ALL_PROCESSES=0 "$python" "$root/bench/fork_cost.py" "$mib" "$forks" "gpuleak, GPULEAK_ALL_PROCESSES=0"
    rm -f "$tmp"/trace.*
done
