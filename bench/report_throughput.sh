#!/usr/bin/env bash
# Events per second and peak memory of gpuleak-report on traces of 1M and 20M events (with the program's
# markers, and without: gpuleak_unmarked), and of
# heaptrack_print on heaptrack traces of the same program making the same number of allocations and
# frees, side by side in one run. Figures in bench/README.md. A benchmark, not a test: it prints
# figures and checks nothing about them.
#
# Usage: bench/report_throughput.sh
# Environment: EVENTS (events per trace, default "1000000 20000000"), REPS (timed runs of each
# configuration, default 5; the median is reported), BIG_MB (GPULEAK_MAX_MB of the traces whose ring
# holds every event, default 4096; 0 leaves them out), WORK (directory for the traces, default a
# temporary one; it needs BIG_MB MiB per size plus about 1 GiB), BUILD (build tree, default build/ in
# the repository; built first with scripts/build.sh unless SKIP_BUILD=1).
set -euo pipefail
# shellcheck source=bench/stats.sh
source "$(dirname "$0")/stats.sh"

root=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD:-$root/build}
read -r -a sizes <<<"${EVENTS:-1000000 20000000}"
reps=${REPS:-5}
big_mb=${BIG_MB:-4096}

if [[ ${SKIP_BUILD:-0} != 1 ]]; then
    "$root/scripts/build.sh" "$build" >/dev/null
fi
workload=$build/bench/bench_report_workload
gpuleak=$build/interpose/libgpuleak.so
report=$build/analyzer/gpuleak-report
for tool in heaptrack heaptrack_print zstd /usr/bin/time; do
    command -v "$tool" >/dev/null || {
        echo "report_throughput: $tool is not installed (scripts/setup.sh installs it)" >&2
        exit 1
    }
done

if [[ -n ${WORK:-} ]]; then
    mkdir -p "$WORK"
    tmp=$(mktemp -d "$WORK/report_throughput.XXXXXX")
else
    tmp=$(mktemp -d)
fi
trap 'rm -rf "$tmp"' EXIT
export GPULEAK_SIM_QUIET=1 GPULEAK_QUIET=1
# The report keeps the frames it read from debug info here; the report that each trace gets when it is
# made fills it, so the timed reports take their frames from it, as every report but a library's
# first does. The *_cold configurations do without it.
export GPULEAK_CACHE_DIR=$tmp/symbol-cache
unset GPULEAK_MAX_MB GPULEAK_STACK_DEPTH

# The big-ring traces are allocated in full when created (posix_fallocate): leave them out when the
# disk cannot take them, rather than fill it.
if ((big_mb > 0)); then
    free_mb=$(df -Pm "$tmp" | awk 'NR == 2 { print $4 }')
    need_mb=$((big_mb * ${#sizes[@]} + 1024))
    if ((free_mb < need_mb)); then
        echo "report_throughput: $free_mb MiB free in $tmp, the big-ring traces need $need_mb; left out" >&2
        big_mb=0
    fi
fi

configs=()
declare -A trace_of events_of in_file_of bytes_of
# A JSON summary figure of gpuleak-report's output in file $2 ("events", "events_overwritten").
summary_figure() {
    sed -n "s/^ *\"$1\": \([0-9]*\),\{0,1\}\$/\1/p" "$2" | head -1
}

# One gpuleak trace of N events ($1) with GPULEAK_MAX_MB=$2 ("" for the default) as configuration $3; more
# arguments go to the workload.
make_gpuleak_trace() {
    local events=$1 max_mb=$2 config=$3 dir=$tmp/$3
    shift 3
    mkdir "$dir"
    (
        if [[ -n $max_mb ]]; then
            export GPULEAK_MAX_MB=$max_mb
        fi
        LD_PRELOAD=$gpuleak GPULEAK_OUTPUT=$dir/trace.%p "$workload" cuda --pairs $((events / 2)) "$@" >"$dir/run.out"
    )
    local traces=("$dir"/trace.*)
    [[ -f ${traces[0]} ]] || {
        echo "report_throughput: gpuleak left no trace for $config" >&2
        exit 1
    }
    "$report" --format json "${traces[0]}" >"$dir/report.json" 2>/dev/null
    trace_of[$config]=${traces[0]}
    events_of[$config]=$(summary_figure events "$dir/report.json")
    in_file_of[$config]=$((events_of[$config] - $(summary_figure events_overwritten "$dir/report.json")))
    bytes_of[$config]=$(stat -c %s "${traces[0]}")
    configs+=("$config")
}

# One heaptrack trace of the same program making N/2 malloc/free pairs as configuration $2.
make_heaptrack_trace() {
    local events=$1 config=$2 dir=$tmp/$2
    mkdir "$dir"
    heaptrack -o "$dir/trace" "$workload" malloc --pairs $((events / 2)) >"$dir/run.out" 2>&1
    local traces=("$dir"/trace.*)
    [[ -f ${traces[0]} ]] || {
        echo "report_throughput: heaptrack left no trace for $config" >&2
        cat "$dir/run.out" >&2
        exit 1
    }
    trace_of[$config]=${traces[0]}
    # Its events: one line per allocation (+) and per free (-), the program's start-up ones included.
    events_of[$config]=$(zstd -dc "${traces[0]}" | grep -c '^[+-] ')
    in_file_of[$config]=${events_of[$config]}
    bytes_of[$config]=$(stat -c %s "${traces[0]}")
    configs+=("$config")
}

for events in "${sizes[@]}"; do
    echo "report_throughput: making the traces of $events events" >&2
    make_gpuleak_trace "$events" "" "gpuleak_$events"
    # The same trace reported without the frames kept by earlier reports.
    trace_of[gpuleak_cold_$events]=${trace_of[gpuleak_$events]}
    events_of[gpuleak_cold_$events]=${events_of[gpuleak_$events]}
    in_file_of[gpuleak_cold_$events]=${in_file_of[gpuleak_$events]}
    bytes_of[gpuleak_cold_$events]=${bytes_of[gpuleak_$events]}
    configs+=("gpuleak_cold_$events")
    if ((big_mb > 0)); then
        make_gpuleak_trace "$events" "$big_mb" "gpuleak_big_$events"
    fi
    # Without markers the kept allocations are judged by the repetitions between them: a pass over the
    # ring from the newest kept ones back (analyzer/model/repetition.h).
    make_gpuleak_trace "$events" "" "gpuleak_unmarked_$events" --unmarked
    make_heaptrack_trace "$events" "heaptrack_$events"
done

# One timed run of configuration $1: appends wall-clock seconds, CPU seconds and peak RSS (KiB).
run_config() {
    local config=$1 trace=${trace_of[$1]} times=$tmp/times
    case $config in
    gpuleak_cold*) /usr/bin/time -f '%e %U %S %M' -o "$times" "$report" --format json --no-symbol-cache "$trace" \
        >/dev/null 2>"$tmp/err" ;;
    gpuleak*) /usr/bin/time -f '%e %U %S %M' -o "$times" "$report" --format json "$trace" >/dev/null 2>"$tmp/err" ;;
    heaptrack*) /usr/bin/time -f '%e %U %S %M' -o "$times" heaptrack_print "$trace" >/dev/null 2>"$tmp/err" ;;
    esac || {
        echo "report_throughput: $config failed:" >&2
        cat "$tmp/err" >&2
        exit 1
    }
    # GNU time prints the command's exit status first when it is not 0; the last line is the figures.
    read -r wall user system rss < <(tail -1 "$times")
    echo "$wall" >>"$tmp/$config.wall"
    echo "$user $system" | awk '{ print $1 + $2 }' >>"$tmp/$config.cpu"
    echo "$rss" >>"$tmp/$config.rss"
}

load_before=$(cut -d' ' -f1-3 /proc/loadavg)
# Interleaved, one configuration at a time, so that drift of the machine over the run touches every
# configuration alike. The traces are in the page cache after the first repetition for all of them.
for ((rep = 1; rep <= reps; ++rep)); do
    for config in "${configs[@]}"; do
        run_config "$config"
    done
    echo "report_throughput: repetition $rep of $reps done" >&2
done

table=$tmp/table
for config in "${configs[@]}"; do
    echo "$config ${events_of[$config]} ${in_file_of[$config]} ${bytes_of[$config]}" \
        "$(stat_of "$tmp/$config.wall") $(stat_of "$tmp/$config.cpu") $(stat_of "$tmp/$config.rss")" >>"$table"
done

model=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1)
echo "machine: $(nproc) cores, ${model:-unknown CPU}, Linux $(uname -r), $(ldd --version | head -1)"
echo "load average before / after: $load_before / $(cut -d' ' -f1-3 /proc/loadavg)"
echo "heaptrack: $(heaptrack --version 2>&1 | head -1)"
echo "run: $reps repetitions of each configuration, interleaved; gpuleak-report --format json TRACE >/dev/null;" \
    "heaptrack_print TRACE >/dev/null; big ring: GPULEAK_MAX_MB=$big_mb"
echo
awk '
    {
        events[$1] = $2; in_file[$1] = $3; bytes[$1] = $4; wall[$1] = $5; wall_low[$1] = $6; wall_high[$1] = $7
        cpu[$1] = $8; rss[$1] = $11; order[NR] = $1
    }
    END {
        printf "| %-24s | %10s | %10s | %9s | %8s | %13s | %8s | %10s | %12s | %14s | %9s |\n", "configuration",
            "events", "in file", "file MiB", "wall s", "min-max", "CPU s", "M events/s", "M events/CPU s",
            "M in file/s", "peak MiB"
        printf "| %-24s | %10s | %10s | %9s | %8s | %13s | %8s | %10s | %12s | %14s | %9s |\n", "---", "---:",
            "---:", "---:", "---:", "---:", "---:", "---:", "---:", "---:", "---:"
        for (i = 1; i <= NR; ++i) {
            c = order[i]
            printf "| %-24s | %10d | %10d | %9.1f | %8.2f | %13s | %8.2f | %10.1f | %12.1f | %14.1f | %9.1f |\n",
                c, events[c], in_file[c], bytes[c] / 1048576, wall[c],
                sprintf("%.2f-%.2f", wall_low[c], wall_high[c]), cpu[c], events[c] / wall[c] / 1e6,
                events[c] / cpu[c] / 1e6, in_file[c] / wall[c] / 1e6, rss[c] / 1024
        }
        print ""
        for (i = 1; i <= NR; ++i) {
            c = order[i]
            if (c !~ /^heaptrack_/)
                continue
            n = substr(c, 11)
            for (j = 1; j <= NR; ++j) {
                g = order[j]
                if (g == "gpuleak_" n || g == "gpuleak_cold_" n || g == "gpuleak_big_" n)
                    printf "%s / %s events per second: %.2f wall clock, %.2f CPU time (goal: at least 2)\n",
                        g, c, (events[g] / wall[g]) / (events[c] / wall[c]), (events[g] / cpu[g]) / (events[c] / cpu[c])
            }
        }
        print "events: what the run recorded (gpuleak: the header counter ring_head; heaptrack: + and - lines)."
        print "gpuleak_cold: the default trace reported with --no-symbol-cache (a library'"'"'s first report)."
        print "in file: events the trace still holds; gpuleak'"'"'s default ring keeps only the newest, by design."
        print "M events/s: events / wall s; M in file/s: in file / wall s (what was actually read)."
        print "wall s, CPU s (user + system), peak MiB (maximum resident set): medians of the repetitions."
    }' "$table"
