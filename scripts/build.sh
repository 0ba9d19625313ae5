#!/usr/bin/env bash
# Configures and builds one tree: all of it, or the targets named after `--`.
# Usage: scripts/build.sh [BUILD_DIR] [extra cmake arguments...] [-- TARGET...]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build}
shift || true
jobs=$(nproc 2>/dev/null || echo 2)
configure=()
while (($# > 0)) && [[ $1 != -- ]]; do
    configure+=("$1")
    shift
done
targets=()
if (($# > 0)); then
    shift
    targets=(--target "$@")
fi
cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo ${configure[@]+"${configure[@]}"} >/dev/null
cmake --build "$build" -j "$jobs" ${targets[@]+"${targets[@]}"}
