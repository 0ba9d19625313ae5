#!/usr/bin/env bash
# One prepared run on a machine with a real NVIDIA GPU and PyTorch, and no network: runs PyTorch's
# scenarios of tests/torch/test_torch_adapter.py and the workload corpus of tests/workloads/ (through
# tests/torch/test_workloads.py) on the real device under libgpuleak.so, comparing the report with
# PyTorch's own counters, plus one allocation each with CuPy and JAX, and the verdicts of JAX and
# TensorFlow on a loop that keeps every batch (tests/jax/programs, tests/tensorflow/programs), where they
# are installed, and prints a compact pass/fail table. Exits 1 when a check failed, 2 when it could not
# start. Installs nothing, and is meant to finish within five minutes.
#
#   scripts/gpu-validate.sh [PACKAGE]
#
# PACKAGE: a tarball of scripts/pack-build.sh (a -DGPULEAK_STATIC_DEPS=ON build, which needs neither
# fmt, libunwind nor elfutils there) or that tarball unpacked. Without it, GPULEAK_VALIDATE_BUILD names
# a build tree of this repository; else the script builds one (it then needs gpuleak's build
# dependencies on that machine).
#
# Environment: GPULEAK_VALIDATE_PYTHON (the interpreter with torch; default python3), GPULEAK_VALIDATE_JOBS
# (scenarios run at once, default 4), GPULEAK_VALIDATE_SCENARIOS (run only the scenarios whose names
# hold one of these words; default all), GPULEAK_VALIDATE_ADAPTER_DIR (where the PyTorch adapter is
# built, kept between runs; default a temporary directory), CUDA_HOME (CUDA headers for the adapter's
# build, default /usr/local/cuda), GPULEAK_VALIDATE_SIMULATED=1 (a dry run on gpuleak's simulated
# device instead, where no GPU is, as CI runs it: the package's or build's simulated CUDA libraries, the
# CUDA 13 toolkit's other libraries from GPULEAK_CUDA_LIB_DIR, default /usr/local/cuda/lib64, and by
# default the interpreter of an environment scripts/setup-torch.sh made; CuPy and JAX are left out).
# Exit status 3: no interpreter that imports torch, or for a dry run no CUDA 13 toolkit libraries (the
# dry run's ctest counts it as skipped).
set -uo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
simulated=${GPULEAK_VALIDATE_SIMULATED:-0}
jobs=${GPULEAK_VALIDATE_JOBS:-4}
started=$SECONDS

tmp=$(mktemp -d "${TMPDIR:-/tmp}/gpuleak-validate.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

die() {
    echo "gpu-validate: $*" >&2
    exit 2
}

# The table: one row per check, printed at the end.
rows=()
failed=0
row() { # result name detail
    rows+=("$(printf '%-4s  %-48s  %s' "$1" "$2" "$3")")
    [[ $1 == FAIL ]] && failed=1
    return 0
}

# Where the programs, the simulated device and the scenarios' sources are.
if [[ -n ${1:-} ]]; then
    package=$1
    if [[ -f $package ]]; then
        tar -xzf "$package" -C "$tmp" || die "cannot unpack $package"
        package=$tmp/gpuleak-validate
    fi
    [[ -x $package/bin/gpuleak ]] || die "$package is not a package of scripts/pack-build.sh"
    library=$package/lib/libgpuleak.so
    report=$package/bin/gpuleak-report
    launcher=$package/bin/gpuleak
    simdevice=$package/simdevice
    sources=$package
    origin="package $1 ($(sed -n 's/^commit: //p' "$package/BUILD-INFO"))"
else
    build=${GPULEAK_VALIDATE_BUILD:-}
    if [[ -z $build ]]; then
        build=$tmp/build
        echo "gpu-validate: building gpuleak into $build" >&2
        # Only what the validation runs; the simulated device comes with the tests, which only a dry
        # run needs.
        tests=OFF targets=(gpuleak gpuleak-report gpuleak_command)
        if [[ $simulated == 1 ]]; then
            tests=ON targets+=(simdevice)
        fi
        if ! cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DGPULEAK_BUILD_TESTS=$tests \
            >"$tmp/build.log" 2>&1 ||
            ! cmake --build "$build" -j "$(nproc)" --target "${targets[@]}" >>"$tmp/build.log" 2>&1; then
            tail -20 "$tmp/build.log" >&2
            die "the build failed (a package of scripts/pack-build.sh needs no build dependencies)"
        fi
    fi
    library=$build/interpose/libgpuleak.so
    report=$build/analyzer/gpuleak-report
    launcher=$build/launcher/gpuleak
    simdevice=$build/simdevice
    sources=$root
    origin="build tree $build"
fi
[[ -f $library && -x $report && -x $launcher ]] || die "no libgpuleak.so, gpuleak-report or gpuleak in $origin"

# The interpreter with torch.
python=${GPULEAK_VALIDATE_PYTHON:-}
if [[ -z $python ]]; then
    python=python3
    if [[ $simulated == 1 ]]; then
        # An environment scripts/setup-torch.sh completed (its stamp is written last); none is made
        # here, so a dry run in CI never downloads.
        for environment in ${GPULEAK_TORCH_DIR:-"$HOME"/.cache/gpuleak/torch-*-py3.*}; do
            if [[ -f $environment/.gpuleak-torch-complete && -x $environment/bin/python ]]; then
                python=$environment/bin/python
                break
            fi
        done
    fi
fi
if ! "$python" -c 'import torch' 2>/dev/null; then
    echo "gpu-validate: $python cannot import torch (set GPULEAK_VALIDATE_PYTHON;" \
        "scripts/setup-torch.sh makes an environment for a dry run)" >&2
    exit 3
fi

export PYTHONDONTWRITEBYTECODE=1 PYTHONWARNINGS=ignore
if [[ $simulated == 1 ]]; then
    cuda_lib_dir=${GPULEAK_CUDA_LIB_DIR:-/usr/local/cuda/lib64}
    # torch's CUDA wheel links against the toolkit's libraries, which the simulated device does not stand
    # in for: without them there is nothing to run, as for test_torch_adapter.py, which skips.
    if [[ ! -f $cuda_lib_dir/libcublas.so.13 ]]; then
        echo "gpu-validate: no CUDA 13 toolkit libraries in $cuda_lib_dir (set GPULEAK_CUDA_LIB_DIR)" >&2
        exit 3
    fi
    # What the scenarios' environment is on the simulated device; the other checks get the same.
    device_environment=(LD_LIBRARY_PATH="$simdevice:$cuda_lib_dir" PYTHONPATH="$simdevice/python"
        GPULEAK_SIM_QUIET=1 GPULEAK_SIM_CAPACITY=4G)
    scenario_environment=(GPULEAK_TEST_SIMDEVICE_DIR="$simdevice" GPULEAK_CUDA_LIB_DIR="$cuda_lib_dir")
else
    device_environment=()
    scenario_environment=(GPULEAK_TEST_REAL_DEVICE=1)
fi

# What is being validated, and on what.
device=$(env "${device_environment[@]}" "$python" -c '
import torch
if not torch.cuda.is_available():
    raise SystemExit(1)
print(f"torch {torch.__version__} (CUDA {torch.version.cuda}),",
      f"{torch.cuda.device_count()} x {torch.cuda.get_device_name(0)}")' 2>/dev/null) ||
    die "torch sees no CUDA device"
row PASS "device" "$device$([[ $simulated == 1 ]] && echo ' [simulated]')"

# The programs start: a carried build needs none of its build machine's libraries.
missing=$(ldd "$library" "$report" "$launcher" 2>&1 | grep 'not found' | sort -u | tr -s ' \t\n' ' ')
if [[ -n $missing ]]; then
    row FAIL "libraries found" "$missing"
elif ! "$report" --help >/dev/null 2>&1; then
    row FAIL "libraries found" "gpuleak-report --help fails"
else
    row PASS "libraries found" "$origin"
fi

# The PyTorch scenarios, adapter build first, through the runner (pytest may be missing there).
# The adapter is compiled for this torch from the sources beside the programs, into a temporary cache.
read -r -a scenario_names <<<"${GPULEAK_VALIDATE_SCENARIOS:-}"
timeout 300 env "${device_environment[@]}" "${scenario_environment[@]}" \
    GPULEAK_TEST_LIBRARY="$library" GPULEAK_TEST_REPORT="$report" GPULEAK_TEST_LAUNCHER="$launcher" \
    GPULEAK_TEST_TORCH_PYTHON="$python" \
    GPULEAK_TEST_ADAPTER_DIR="${GPULEAK_VALIDATE_ADAPTER_DIR:-}" \
    "$python" "$sources/tests/torch/scenario_runner.py" --jobs "$jobs" "${scenario_names[@]}" \
    >"$tmp/scenarios.out" 2>"$tmp/scenarios.err"
status=$?
while read -r result name detail; do
    case $result in
    PASS) row PASS "torch: $name" "${detail}s" ;;
    SKIP | FAIL) row "$result" "torch: $name" "$detail" ;;
    esac
done <"$tmp/scenarios.out"
# The runner's stderr holds the tracebacks: kept past the temporary directory when something failed.
kept_log=""
if ((status != 0)); then
    kept_log=${TMPDIR:-/tmp}/gpuleak-validate-scenarios.err
    cp "$tmp/scenarios.err" "$kept_log"
    if ! grep -q '^FAIL' "$tmp/scenarios.out"; then
        ((status == 124)) && status="$status (timed out)"
        row FAIL "torch: scenarios" "runner exited $status: $(tail -1 "$tmp/scenarios.err")"
    fi
fi

# gpuleak run: the launcher finds the library beside it and writes the run's report.
if timeout 120 env "${device_environment[@]}" GPULEAK_TORCH=0 "$launcher" run -o "$tmp/run" -- "$python" -c \
    'import torch; x = torch.empty(1 << 20, device="cuda"); torch.cuda.synchronize()' >/dev/null 2>"$tmp/run.err" &&
    compgen -G "$tmp/run/*.trace" >/dev/null; then
    row PASS "gpuleak run" "trace and report in the run directory"
    # The runtime made its context through cuDevicePrimaryCtxRetain, which the trace records with the UUID.
    context=$("$python" -c 'import json, sys
contexts = json.load(open(sys.argv[1]))["processes"][0]["contexts"]
print("ok " + contexts[0]["uuid"] if contexts and contexts[0]["uuid"] else "no context recorded: %r" % contexts)' \
        "$tmp/run/report.json" 2>&1 | tail -1)
    if [[ $context == ok* ]]; then
        row PASS "gpuleak run: context" "${context#ok }"
    else
        row FAIL "gpuleak run: context" "$context"
    fi
else
    row FAIL "gpuleak run" "$(tail -1 "$tmp/run.err")"
fi

# Whether a check of another framework's can run here: on a real device, with $2 importable and seeing
# a GPU (a TensorFlow without its CUDA libraries runs on the CPU); else its row says why it is skipped.
# $1: the check's name.
framework_here() {
    local sees_gpu status=0
    if [[ $simulated == 1 ]]; then
        row SKIP "$1" "not on the simulated device"
        return 1
    fi
    case $2 in
        jax) sees_gpu='assert jax.devices("gpu")' ;;
        tensorflow) sees_gpu='assert tensorflow.config.list_physical_devices("GPU")' ;;
        *) sees_gpu="assert $2.cuda.runtime.getDeviceCount() > 0" ;;
    esac
    # One interpreter for both questions: a framework's import takes seconds. 3: not importable.
    "$python" -c "
import sys
try:
    import $2
except Exception:
    sys.exit(3)
$sees_gpu" >/dev/null 2>&1 || status=$?
    if ((status == 3)); then
        row SKIP "$1" "$2 is not importable by $python"
        return 1
    elif ((status != 0)); then
        row SKIP "$1" "$2 sees no GPU (its CUDA libraries are missing)"
        return 1
    fi
}

# One allocation of 64 MiB by a framework other than PyTorch, seen in the report's peak. $1: the name,
# $2: the module it needs, $3: the Python code; the rest: environment for the program.
framework_check() {
    local name=$1 module=$2 code=$3 peak
    shift 3
    framework_here "$name: one allocation" "$module" || return 0
    rm -f "$tmp/$name.trace"
    if ! timeout 120 env "$@" LD_PRELOAD="$library" GPULEAK_OUTPUT="$tmp/$name.trace" GPULEAK_QUIET=1 \
        "$python" -c "$code" >/dev/null 2>"$tmp/$name.err"; then
        row FAIL "$name: one allocation" "the program failed: $(tail -1 "$tmp/$name.err")"
        return
    fi
    peak=$("$report" --format json --no-symbol-cache "$tmp/$name.trace" 2>"$tmp/$name.report.err" | "$python" -c '
import json, sys
devices = [device for process in json.load(sys.stdin)["processes"] for device in process["summary"]["devices"]]
print(max([device["peak_reserved_bytes"] for device in devices] or [0]))')
    if [[ -n $peak ]] && ((peak >= 64 << 20)); then
        row PASS "$name: one allocation" "peak $((peak >> 20)) MiB in the report"
    else
        row FAIL "$name: one allocation" "the report's peak is ${peak:-missing} bytes, not 64 MiB or more"
    fi
}
framework_check cupy cupy 'import cupy; x = cupy.empty(64 << 20, dtype=cupy.uint8); cupy.cuda.Device().synchronize()'
# XLA takes 75 % of the GPU at start unless told otherwise; "platform" allocates each buffer as asked.
framework_check jax jax 'import jax, jax.numpy as jnp; x = jnp.zeros(16 << 20, dtype=jnp.float32).block_until_ready()' \
    XLA_PYTHON_CLIENT_PREALLOCATE=false XLA_PYTHON_CLIENT_ALLOCATOR=platform

# The verdicts of JAX and TensorFlow on a real GPU, each on its loop that keeps every batch
# (tests/jax/programs/train_keeps_batches.py, tests/tensorflow/programs/train_keeps_batches.py) under
# gpuleak run: by default the framework's pool is explained, not called a leak; with each buffer allocated
# as asked (XLA's platform allocator, TensorFlow's cuda_malloc_async), the batches are a leak at the line
# that made them. tests/jax and tests/tensorflow ask the same of the simulated device.
# $1: the module, $2: the check's name, $3: Python that reads report.json and prints "ok DETAIL" or why
# not (its arguments: report.json and the module); the rest: environment.
framework_verdict() {
    local module=$1 name=$2 check=$3 verdict
    shift 3
    framework_here "$module: $name" "$module" || return 0
    if ! timeout 180 env "${device_environment[@]}" "$@" "$launcher" run --quiet -o "$tmp/$module-$name" -- \
        "$python" "$sources/tests/$module/programs/train_keeps_batches.py" >/dev/null 2>"$tmp/$module-$name.err"; then
        row FAIL "$module: $name" "the program failed: $(tail -1 "$tmp/$module-$name.err")"
        return
    fi
    verdict=$("$python" -c "$check" "$tmp/$module-$name/report.json" "$module" 2>&1 | tail -1)
    if [[ $verdict == ok* ]]; then
        row PASS "$module: $name" "${verdict#ok }"
    else
        row FAIL "$module: $name" "$verdict"
    fi
}
pool_check='import json, sys
(process,) = json.load(open(sys.argv[1]))["processes"]
diagnosis = process["diagnosis"]
pool = diagnosis["framework_pool"] or {}
ok = pool.get("framework") == sys.argv[2] and diagnosis["kind"] == "stable"
print("ok pool of %d MiB in %d regions" % (pool["bytes"] >> 20, pool["regions"]) if ok else diagnosis["text"][:160])'
# $1 of the check: the line of the program that makes each batch.
leak_check() {
    echo 'import json, sys
(process,) = json.load(open(sys.argv[1]))["processes"]
diagnosis = process["diagnosis"]
top = process["growth"][0] if process["growth"] else {"frames": []}
lines = [f["line"] for f in top["frames"] if f.get("python") and f["file"].endswith("train_keeps_batches.py")]
ok = diagnosis["kind"] == "leak" and lines[:1] == ['"$1"']
print("ok leak at train_keeps_batches.py:'"$1"'" if ok else diagnosis["text"][:160])'
}
framework_verdict jax pool "$pool_check"
framework_verdict jax platform "$(leak_check 14)" XLA_PYTHON_CLIENT_PREALLOCATE=false XLA_PYTHON_CLIENT_ALLOCATOR=platform
framework_verdict tensorflow pool "$pool_check"
framework_verdict tensorflow cuda_malloc_async "$(leak_check 8)" TF_GPU_ALLOCATOR=cuda_malloc_async

echo
printf '%s\n' "${rows[@]}"
echo
if ((failed)); then
    echo "gpu-validate: FAILED in $((SECONDS - started)) s${kept_log:+; tracebacks of the scenarios: $kept_log}"
    exit 1
fi
echo "gpu-validate: passed in $((SECONDS - started)) s"
