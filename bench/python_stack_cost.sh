#!/usr/bin/env bash
# What recording a Python stack adds to an allocation, per CPython version: cudaMalloc/cudaFree pairs
# made through ctypes from a 30-frame Python stack under libgpuleak.so, with Python frames recorded
# (GPULEAK_PYTHON=1) and without (GPULEAK_PYTHON=0), side by side; the difference is the cost of the
# Python stack. Figures in bench/README.md. A benchmark, not a test: it checks nothing about them.
#
# Usage: bench/python_stack_cost.sh
# Environment: DEPTH (Python frames at the call, default 30), PAIRS (timed pairs per run, default
# 200000), WARMUP (default 20000), REPS (runs of each configuration, default 5; the median is
# reported), PYTHONS (interpreters, default every CPython 3.10+ under pyenv), BUILD (build tree, default
# build/; built first with scripts/build.sh unless SKIP_BUILD=1).
set -euo pipefail
# shellcheck source=bench/stats.sh
source "$(dirname "$0")/stats.sh"

root=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD:-$root/build}
depth=${DEPTH:-30}
pairs=${PAIRS:-200000}
warmup=${WARMUP:-20000}
reps=${REPS:-5}
if [[ ${SKIP_BUILD:-0} != 1 ]]; then
    "$root/scripts/build.sh" "$build" >/dev/null
fi
if [[ -n ${PYTHONS:-} ]]; then
    read -r -a pythons <<<"$PYTHONS"
else
    pythons=()
    for interpreter in "${PYENV_ROOT:-$HOME/.pyenv}"/versions/3.*/bin/python3.*; do
        [[ $interpreter =~ /versions/3\.([0-9]+)\.[0-9]+/bin/python3\.[0-9]+$ ]] || continue
        ((BASH_REMATCH[1] >= 10)) && pythons+=("$interpreter")
    done
fi
((${#pythons[@]} > 0)) || {
    echo "python_stack_cost: no CPython 3.10 or later found (set PYTHONS)" >&2
    exit 1
}

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cudart=$build/simdevice/libcudart.so.13
export GPULEAK_SIM_QUIET=1 GPULEAK_QUIET=1

# One run; appends its ns per pair and CPU ns per pair to $tmp/$1 and $tmp/$1.cpu.
run() {
    local name=$1 python=$2 record=$3 line
    line=$(GPULEAK_PYTHON=$record GPULEAK_OUTPUT="$tmp/trace.%p" LD_PRELOAD="$build/interpose/libgpuleak.so" \
        "$python" "$root/bench/python_stack_cost.py" "$cudart" "$depth" "$pairs" "$warmup")
    rm -f "$tmp"/trace.*
    sed -n 's/.* ns_per_pair=\([0-9.]*\) .*/\1/p' <<<"$line" >>"$tmp/$name"
    sed -n 's/.* cpu_ns_per_pair=\([0-9.]*\)$/\1/p' <<<"$line" >>"$tmp/$name.cpu"
}

for ((rep = 1; rep <= reps; rep++)); do
    for python in "${pythons[@]}"; do
        version=$("$python" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
        run "$version.on" "$python" 1
        run "$version.off" "$python" 0
    done
done

echo "machine: $(nproc) cores, $(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1), load average $(cut -d' ' -f1-3 /proc/loadavg)"
echo "run: $reps repetitions, interleaved; $pairs timed pairs after $warmup, $depth Python frames at each call"
echo
echo "| CPython | with Python frames ns/pair | without | Python stack ns | CPU: with | without | Python stack ns |"
echo "| --- | ---: | ---: | ---: | ---: | ---: | ---: |"
for python in "${pythons[@]}"; do
    version=$("$python" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
    read -r on _ _ <<<"$(stat_of "$tmp/$version.on")"
    read -r off _ _ <<<"$(stat_of "$tmp/$version.off")"
    read -r on_cpu _ _ <<<"$(stat_of "$tmp/$version.on.cpu")"
    read -r off_cpu _ _ <<<"$(stat_of "$tmp/$version.off.cpu")"
    awk -v v="$version" -v a="$on" -v b="$off" -v c="$on_cpu" -v d="$off_cpu" \
        'BEGIN { printf "| %s | %.1f | %.1f | **%.1f** | %.1f | %.1f | %.1f |\n", v, a, b, a - b, c, d, c - d }'
done
