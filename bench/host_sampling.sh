#!/usr/bin/env bash
# What sampling host memory costs each process (the issue's budget: 1 % of one core at the default
# interval): the gpuleak sampler thread's CPU time in a Python process holding 0, 256 MiB, 1 GiB and
# 4 GiB, in a forked child sharing 1 GiB with its parent, in one whose heap holds 260,000 free
# blocks (malloc's free lists, which counting its free memory walks), and in a spawned child before its
# target runs (the sampler looks for the target at every sample). Figures in bench/README.md. A
# benchmark, not a test: it checks nothing about them.
#
# Usage: bench/host_sampling.sh
# Environment: SECONDS_EACH (idle time measured per configuration, default 20), PYTHON (default
# python3), GPULEAK_SAMPLE_MS (default gpuleak's, 100), BUILD (build tree, default build/; built first
# with scripts/build.sh unless SKIP_BUILD=1).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD:-$root/build}
seconds=${SECONDS_EACH:-20}
python=${PYTHON:-python3}
if [[ ${SKIP_BUILD:-0} != 1 ]]; then
    "$root/scripts/build.sh" "$build" >/dev/null
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
run() {
    LD_PRELOAD="$build/interpose/libgpuleak.so" GPULEAK_OUTPUT="$tmp/trace.%p" GPULEAK_QUIET=1 \
        "$python" "$root/bench/host_sampling.py" "$@"
}
echo "host_sampling: $(nproc) cores, $(uname -r), interval ${GPULEAK_SAMPLE_MS:-100} ms, ${seconds} s each"
for mib in 0 256 1024 4096; do
    run "$mib" "$seconds" alone
done
run 1024 "$seconds" fork
run 0 "$seconds" holes 260000
run 0 "$seconds" spawned
