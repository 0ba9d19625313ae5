#!/usr/bin/env bash
# Overhead per tensor allocation/free pair of PyTorch's caching allocator: gpuleak with its PyTorch
# adapter against PyTorch's own recorder, torch.cuda.memory._record_memory_history(enabled="all",
# context="all", stacks="python"), both against the same program without either, side by side in one
# run on the simulated device (issue #6, goal: gpuleak's overhead a quarter of PyTorch's or less).
# Figures in bench/README.md. A benchmark, not a test: it prints figures and checks nothing about them.
#
# Usage: bench/torch_overhead.sh
# Configurations: (a) plain, (b) under libgpuleak.so with the adapter, (b0) the same without stacks
# (GPULEAK_STACK_DEPTH=0, to split the cost), (c) with PyTorch's recorder, bounded to 100,000 entries.
# Environment: PAIRS (timed pairs per run, default 60000), WARMUP (untimed pairs first, default 6000),
# REPS (runs per configuration, default 5; the median is reported), BUILD (build tree, default build/;
# built first with scripts/build.sh unless SKIP_BUILD=1), GPULEAK_TORCH_DIR (the PyTorch environment;
# default: scripts/setup-torch.sh's, made if missing), GPULEAK_CUDA_LIB_DIR (the CUDA 13 toolkit's
# libraries torch links against, default /usr/local/cuda/lib64).
set -euo pipefail
# shellcheck source=bench/stats.sh
source "$(dirname "$0")/stats.sh"

root=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD:-$root/build}
pairs=${PAIRS:-60000}
warmup=${WARMUP:-6000}
reps=${REPS:-5}
cuda_lib_dir=${GPULEAK_CUDA_LIB_DIR:-/usr/local/cuda/lib64}

if [[ ${SKIP_BUILD:-0} != 1 ]]; then
    "$root/scripts/build.sh" "$build" >/dev/null
fi
torch_dir=${GPULEAK_TORCH_DIR:-$("$root/scripts/setup-torch.sh")}
python=$torch_dir/bin/python

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# The adapter for this torch, in a cache of the run's own: what is measured is this tree's adapter.
adapter_cache=$tmp/adapter
GPULEAK_TORCH_ADAPTER_DIR=$adapter_cache "$root/torch_adapter/build-adapter.sh" "$python" >/dev/null

export GPULEAK_SIM_QUIET=1 PYTHONWARNINGS=ignore
export LD_LIBRARY_PATH=$build/simdevice:$cuda_lib_dir
unset PYTORCH_CUDA_ALLOC_CONF

# One run of configuration $1; appends its wall-clock and CPU ns/pair to $tmp/$1 and $tmp/$1.cpu.
run_config() {
    local config=$1 out=$tmp/out
    case $config in
    plain | history)
        "$python" "$root/bench/torch_overhead.py" "$config" "$pairs" "$warmup" >"$out" 2>&1
        ;;
    gpuleak | gpuleak_nostack)
        local stack_depth=64
        [[ $config == gpuleak_nostack ]] && stack_depth=0
        mkdir "$tmp/trace"
        LD_PRELOAD=$build/interpose/libgpuleak.so GPULEAK_OUTPUT=$tmp/trace/%p.trace GPULEAK_QUIET=1 \
            GPULEAK_TORCH_ADAPTER_DIR=$adapter_cache GPULEAK_STACK_DEPTH=$stack_depth \
            "$python" "$root/bench/torch_overhead.py" gpuleak "$pairs" "$warmup" >"$out" 2>&1
        # The recorder made its trace and attached to the allocator: without the adapter it would
        # record segments only, which the timed pairs never reach, and measure nothing.
        if ! compgen -G "$tmp/trace/*.trace" >/dev/null || grep -q '^gpuleak:' "$out"; then
            echo "torch_overhead: gpuleak did not record tensors:" >&2
            cat "$out" >&2
            exit 1
        fi
        rm -rf "$tmp/trace"
        ;;
    esac
    figure_of torch_overhead "$out" ns_per_pair >>"$tmp/$config"
    figure_of torch_overhead "$out" cpu_ns_per_pair >>"$tmp/$config.cpu"
}

load_before=$(cut -d' ' -f1-3 /proc/loadavg)
configs=(plain gpuleak gpuleak_nostack history)
# Interleaved, one configuration at a time, so that drift of the machine over the run touches every
# configuration alike.
for ((rep = 1; rep <= reps; ++rep)); do
    for config in "${configs[@]}"; do
        run_config "$config"
    done
    echo "torch_overhead: repetition $rep of $reps done" >&2
done

table=$tmp/table
for config in "${configs[@]}"; do
    echo "$config $(stat_of "$tmp/$config") $(stat_of "$tmp/$config.cpu")" >>"$table"
done

model=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1)
echo "machine: $(nproc) cores, ${model:-unknown CPU}, Linux $(uname -r), $(ldd --version | head -1)"
echo "load average before / after: $load_before / $(cut -d' ' -f1-3 /proc/loadavg)"
echo "torch: $("$python" -c 'import torch; print(torch.__version__)'), $("$python" -V)"
echo "run: $reps repetitions of each configuration, interleaved; $pairs timed pairs after $warmup warm-up pairs"
echo
awk '
    { median[$1] = $2; low[$1] = $3; high[$1] = $4; cpu[$1] = $5 }
    function row(label, config, over_wall, over_cpu) {
        printf "| %-58s | %8.1f | %15s | %8s | %8.1f | %8s |\n", label, median[config],
            sprintf("%.1f-%.1f", low[config], high[config]), over_wall, cpu[config], over_cpu
    }
    function over(config, figures) { return sprintf("%.1f", figures[config] - figures["plain"]) }
    END {
        printf "| %-58s | %8s | %15s | %8s | %8s | %8s |\n", "configuration", "ns/pair", "min-max",
            "overhead", "CPU ns", "CPU over"
        printf "| %-58s | %8s | %15s | %8s | %8s | %8s |\n", "---", "---:", "---:", "---:", "---:", "---:"
        row("(a) torch.empty + del, simulated device", "plain", "", "")
        row("(b) (a) under gpuleak with its PyTorch adapter", "gpuleak", over("gpuleak", median), over("gpuleak", cpu))
        row("(b0) as (b) with GPULEAK_STACK_DEPTH=0: no stacks", "gpuleak_nostack", over("gpuleak_nostack", median),
            over("gpuleak_nostack", cpu))
        row("(c) (a) with _record_memory_history(stacks=\"python\")", "history", over("history", median),
            over("history", cpu))
        printf "\ngpuleak overhead / PyTorch recorder overhead, (b-a)/(c-a): %.2f wall clock, %.2f CPU time" \
            " (goal: at most 0.25)\n", (median["gpuleak"] - median["plain"]) / (median["history"] - median["plain"]),
            (cpu["gpuleak"] - cpu["plain"]) / (cpu["history"] - cpu["plain"])
        print "ns/pair: wall clock of the timed loop, median (min-max) of the repetitions. CPU ns: the"
        print "Python thread'"'"'s CPU time per pair, median."
        if (median["plain"] > 1.1 * cpu["plain"])
            print "WARNING: wall clock well above CPU time: the machine was busy; the CPU figures are the ones to use."
    }' "$table"
