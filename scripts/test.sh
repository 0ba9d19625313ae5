#!/usr/bin/env bash
# The whole test gate: sets up a fresh machine, builds once per configuration and runs every tier.
#   1. everything (unit, simulated-device integration, tools) in build/
#   2. the trace reader and the recorder's unit tests under AddressSanitizer + UBSan in build-asan/
#   3. the concurrent recorder tests under ThreadSanitizer in build-tsan/
#   4. formatting: every tracked C/C++ file as clang-format makes it
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
jobs=$(nproc 2>/dev/null || echo 2)

"$root/scripts/setup.sh"

run_tier() {
    local name=$1 build=$2 labels=$3
    shift 3
    echo "== $name" >&2
    "$root/scripts/build.sh" "$build" "$@"
    (cd "$build" && ctest --output-on-failure -j "$jobs" ${labels:+-L "$labels"})
}

run_tier "all tests" "$root/build" ""
run_tier "ASan+UBSan: reader and recorder" "$root/build-asan" "reader|recorder|concurrent" -DGPULEAK_SANITIZE=address,undefined
run_tier "TSan: concurrent recorder" "$root/build-tsan" "concurrent" -DGPULEAK_SANITIZE=thread
echo "== formatting" >&2
"$root/scripts/check-format.sh"
