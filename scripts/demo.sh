#!/usr/bin/env bash
# The demo: sets up, builds, runs a small "training loop" that leaks one buffer per epoch under
# gpuleak on the simulated CUDA device, and shows gpuleak-report's post-mortem of its trace.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/setup.sh"
"$root/scripts/build.sh" "$root/build"

out=$(mktemp -d "${TMPDIR:-/tmp}/gpuleak-demo.XXXXXX")
echo "== running the demo training loop under gpuleak (simulated CUDA device, no GPU needed)" >&2
GPULEAK_OUTPUT="$out/demo.%p.trace" LD_PRELOAD="$root/build/interpose/libgpuleak.so" \
    "$root/build/tests/programs/demo_training" 10
trace=$(ls "$out"/demo.*.trace)
echo "== gpuleak-report $trace" >&2
"$root/build/analyzer/gpuleak-report" "$trace"
