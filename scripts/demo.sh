#!/usr/bin/env bash
# The demo: sets up, builds, runs a small "training loop" that leaks one buffer per epoch under
# gpuleak on the simulated CUDA device, and shows what the trace holds: the live allocations at the
# end, each with the call stack that made it.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/setup.sh"
"$root/scripts/build.sh" "$root/build"

out=$(mktemp -d "${TMPDIR:-/tmp}/gpuleak-demo.XXXXXX")
echo "== running the demo training loop under gpuleak (simulated CUDA device, no GPU needed)" >&2
GPULEAK_OUTPUT="$out/demo.%p.trace" LD_PRELOAD="$root/build/interpose/libgpuleak.so" \
    "$root/build/tests/programs/demo_training" 10
trace=$(ls "$out"/demo.*.trace)
echo "== what the trace $trace holds" >&2
# Everything but the event list: header, accounting, modules, stacks and the live allocations.
"$root/build/tests/tools/gpuleak-dump" "$trace" | sed '/^events:/,$d'
