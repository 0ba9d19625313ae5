#!/usr/bin/env bash
# Overhead per allocation/free pair recorded with a native stack: gpuleak against the same program
# without it, and heaptrack against plain malloc/free, side by side in one run. Figures in
# bench/README.md. A benchmark, not a test: it prints figures and checks nothing about them.
#
# Usage: bench/run_overhead.sh
# Environment: PAIRS (timed pairs per run, default 2000000), WARMUP (untimed pairs first, default
# 300000), REPS (runs per configuration, default 7; the median is reported), DEPTH (frames on the stack
# at the allocation, default 20), SIZE (bytes per allocation, default 256), BUILD (build tree, default
# build/ in the repository; built first with scripts/build.sh unless SKIP_BUILD=1).
set -euo pipefail
# shellcheck source=bench/stats.sh
source "$(dirname "$0")/stats.sh"

root=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD:-$root/build}
pairs=${PAIRS:-2000000}
warmup=${WARMUP:-300000}
reps=${REPS:-7}
depth=${DEPTH:-20}
size=${SIZE:-256}

if [[ ${SKIP_BUILD:-0} != 1 ]]; then
    "$root/scripts/build.sh" "$build" >/dev/null
fi
bench=$build/bench/bench_alloc_pairs
gpuleak=$build/interpose/libgpuleak.so
command -v heaptrack >/dev/null || {
    echo "run_overhead: heaptrack is not installed (scripts/setup.sh installs it)" >&2
    exit 1
}

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export GPULEAK_SIM_QUIET=1
args=(--pairs "$pairs" --warmup "$warmup" --depth "$depth" --size "$size")

# One run of configuration $1; appends its wall-clock and CPU ns/pair to $tmp/$1 and $tmp/$1.cpu.
run_config() {
    local config=$1 out=$tmp/out
    case $config in
    cuda)
        "$bench" cuda "${args[@]}" >"$out" 2>&1
        ;;
    cuda_gpuleak | cuda_gpuleak_nostack)
        local stack_depth=64
        [[ $config == cuda_gpuleak_nostack ]] && stack_depth=0
        mkdir "$tmp/trace"
        LD_PRELOAD=$gpuleak GPULEAK_OUTPUT=$tmp/trace/%p.trace GPULEAK_QUIET=1 \
            GPULEAK_STACK_DEPTH=$stack_depth "$bench" cuda "${args[@]}" >"$out" 2>&1
        # The recorder made its trace (a run it could not record would measure nothing).
        if ! compgen -G "$tmp/trace/*.trace" >/dev/null; then
            echo "run_overhead: gpuleak left no trace" >&2
            exit 1
        fi
        rm -rf "$tmp/trace"
        ;;
    malloc)
        "$bench" malloc "${args[@]}" >"$out" 2>&1
        ;;
    malloc_heaptrack)
        mkdir "$tmp/heaptrack"
        heaptrack -o "$tmp/heaptrack/trace" "$bench" malloc "${args[@]}" >"$out" 2>&1
        # heaptrack saw every pair (its own count includes the program's few other allocations).
        local seen
        seen=$(sed -n 's/^[[:space:]]*allocations:[[:space:]]*\([0-9]*\)$/\1/p' "$out")
        if [[ -z $seen || $seen -lt $((pairs + warmup)) ]]; then
            echo "run_overhead: heaptrack recorded ${seen:-no} allocations, expected $((pairs + warmup))" >&2
            cat "$out" >&2
            exit 1
        fi
        rm -rf "$tmp/heaptrack"
        ;;
    unwind)
        "$bench" unwind "${args[@]}" >"$out" 2>&1
        ;;
    esac
    figure_of bench_alloc_pairs "$out" ns_per_pair >>"$tmp/$config"
    figure_of bench_alloc_pairs "$out" cpu_ns_per_pair >>"$tmp/$config.cpu"
    grep -m1 '^bench_alloc_pairs ' "$out" >"$tmp/$config.line"
}

load_before=$(cut -d' ' -f1-3 /proc/loadavg)
configs=(cuda cuda_gpuleak cuda_gpuleak_nostack malloc malloc_heaptrack unwind)
# Interleaved, one configuration at a time (two cores: heaptrack's own second process needs one), so
# that drift of the machine over the run touches every configuration alike.
for ((rep = 1; rep <= reps; ++rep)); do
    for config in "${configs[@]}"; do
        run_config "$config"
    done
    echo "run_overhead: repetition $rep of $reps done" >&2
done

table=$tmp/table
for config in "${configs[@]}"; do
    echo "$config $(stat_of "$tmp/$config") $(stat_of "$tmp/$config.cpu")" >>"$table"
done
frames=$(sed -n 's/.* frames=\([0-9]*\) .*/\1/p' "$tmp/cuda_gpuleak.line")
if [[ $frames != "$depth" ]]; then
    echo "run_overhead: the program had $frames frames on its stack, not $depth" >&2
    exit 1
fi

model=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1)
echo "machine: $(nproc) cores, ${model:-unknown CPU}, Linux $(uname -r), $(ldd --version | head -1)"
echo "load average before / after: $load_before / $(cut -d' ' -f1-3 /proc/loadavg)"
echo "heaptrack: $(heaptrack --version 2>&1 | head -1)"
echo "run: $reps repetitions of each configuration, interleaved; $pairs timed pairs after $warmup warm-up pairs;" \
    "allocation size $size bytes; $frames frames on the stack at each allocation"
echo
awk -v frames="$frames" '
    { median[$1] = $2; low[$1] = $3; high[$1] = $4; cpu[$1] = $5 }
    function row(label, config, base,   over, cpu_over) {
        over = base == "" ? "" : sprintf("%.1f", median[config] - median[base])
        cpu_over = base == "" ? "" : sprintf("%.1f", cpu[config] - cpu[base])
        printf "| %-46s | %8.1f | %13s | %8s | %8.1f | %8s |\n", label, median[config],
            sprintf("%.1f-%.1f", low[config], high[config]), over, cpu[config], cpu_over
    }
    END {
        printf "| %-46s | %8s | %13s | %8s | %8s | %8s |\n", "configuration", "ns/pair", "min-max",
            "overhead", "CPU ns", "CPU over"
        printf "| %-46s | %8s | %13s | %8s | %8s | %8s |\n", "---", "---:", "---:", "---:", "---:", "---:"
        row("(a) cudaMalloc/cudaFree, simulated device", "cuda", "")
        row("(b) (a) under gpuleak, " frames "-frame stacks", "cuda_gpuleak", "cuda")
        row("(b0) (a) under gpuleak, GPULEAK_STACK_DEPTH=0", "cuda_gpuleak_nostack", "cuda")
        row("(c) malloc/free", "malloc", "")
        row("(d) (c) under heaptrack", "malloc_heaptrack", "malloc")
        row("(e) unw_backtrace alone, same stack", "unwind", "")
        printf "\ngpuleak overhead / heaptrack overhead, (b-a)/(d-c): %.2f wall clock, %.2f CPU time" \
            " (goal: at most 0.50)\n", (median["cuda_gpuleak"] - median["cuda"]) / \
            (median["malloc_heaptrack"] - median["malloc"]), (cpu["cuda_gpuleak"] - cpu["cuda"]) / \
            (cpu["malloc_heaptrack"] - cpu["malloc"])
        print "ns/pair: wall clock of the timed loop, median (min-max) of the repetitions. CPU ns: the"
        print "benchmark thread'"'"'s CPU time, median; for heaptrack it leaves out its interpreter process and"
        print "the time the program waits for it to drain the pipe, so its wall-clock figure is the one to use."
        if (median["cuda"] > 1.1 * cpu["cuda"] || median["unwind"] > 1.1 * cpu["unwind"])
            print "WARNING: wall clock well above CPU time: the machine was busy; rerun on a quiet one."
    }' "$table"
