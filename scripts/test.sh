#!/usr/bin/env bash
# The whole test gate: sets up a fresh machine, builds once per configuration and runs every tier.
#   1. everything (unit, simulated-device integration, tools) in build/
#   2. the trace reader and the recorder's unit tests under AddressSanitizer + UBSan in build-asan/
#   3. the concurrent recorder tests under ThreadSanitizer in build-tsan/
#   4. the trace reader under libFuzzer, ASan and UBSan for GPULEAK_FUZZ_SECONDS (60) in build-fuzz/
#   5. the wheel and the package for a GPU machine: a -DGPULEAK_STATIC_DEPS=ON build of the programs in
#      build-wheel/ by build-wheel.sh, its wheel installed into fresh environments of each CPython, the
#      same build packed by pack-build.sh and run by gpu-validate.sh from the tarball on the simulated device
#   6. formatting: every tracked C/C++ file as clang-format makes it
#   7. the documentation site, built by docs.sh with every warning an error (a broken link, an unknown
#      reference, a page in no table of contents); tier 1 checked its reference against the code
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
jobs=$(nproc 2>/dev/null || echo 2)

"$root/scripts/setup.sh"

run_tier() {
    local name=$1 build=$2 labels=$3
    shift 3
    echo "== $name (at ${SECONDS} s)" >&2
    "$root/scripts/build.sh" "$build" "$@"
    # A test that hangs (a deadlock) fails the tier instead of stalling it; the slowest take about 2 min.
    (cd "$build" && ctest --output-on-failure --timeout 900 -j "$jobs" ${labels:+-L "$labels"})
}

run_tier "all tests" "$root/build" ""
# The trees after the first are built with line tables for debug information (-g1), not -g: a sanitizer's
# report and a symbolized stack still name every file and line, and full debug information takes a
# third of the compiler's time. The symbolizer's fixture keeps its own -g.
line_tables=("-DCMAKE_C_FLAGS_RELWITHDEBINFO=-O2 -g1 -DNDEBUG" "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O2 -g1 -DNDEBUG")
# The sanitizer tiers build only the tests they run: for TSan a small part of the tree, for ASan most of it
# (the reader and the recorder).
run_tier "ASan+UBSan: reader and recorder" "$root/build-asan" "reader|recorder|concurrent" -DGPULEAK_SANITIZE=address,undefined \
    "${line_tables[@]}" -- sanitized_tests
run_tier "TSan: concurrent recorder" "$root/build-tsan" "concurrent" -DGPULEAK_SANITIZE=thread "${line_tables[@]}" \
    -- concurrent_tests

# A fresh corpus each run, seeded from the test builder: the gate stays reproducible from the sources and
# the fuzzer starts past the header checks. A crashing input is kept in build-fuzz/ to reproduce with
# `build-fuzz/tests/fuzz/fuzz_trace_reader FILE`.
fuzz_tier() {
    local build=$root/build-fuzz seconds=${GPULEAK_FUZZ_SECONDS:-60} scratch status=0
    echo "== libFuzzer: trace reader for ${seconds}s (at ${SECONDS} s)" >&2
    cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_C_COMPILER=clang \
        -DCMAKE_CXX_COMPILER=clang++ -DGPULEAK_FUZZ=ON -DGPULEAK_SANITIZE=address,undefined >/dev/null
    cmake --build "$build" -j "$jobs" --target fuzz_trace_reader make_seed_corpus
    scratch=$(mktemp -d)
    mkdir "$scratch/corpus"
    "$build/tests/fuzz/make_seed_corpus" "$scratch/seeds"
    # New inputs go to the first directory; the seeds are only read.
    "$build/tests/fuzz/fuzz_trace_reader" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
        -dict="$root/tests/fuzz/trace_reader.dict" -artifact_prefix="$build/" -print_final_stats=1 \
        "$scratch/corpus" "$scratch/seeds" >"$build/fuzz.log" 2>&1 || status=$?
    rm -rf "$scratch"
    if ((status != 0)); then
        tail -n 80 "$build/fuzz.log" >&2
        echo "fuzz: the trace reader failed (exit $status); the input is in $build/, the log in $build/fuzz.log" >&2
        return 1
    fi
    # The summary only informs: a log without it must not fail the gate.
    grep -E '^#[0-9]+[[:space:]]+DONE|^Done ' "$build/fuzz.log" >&2 || true
}
fuzz_tier

# What users install, and what a machine with a real GPU gets: one -DGPULEAK_STATIC_DEPS=ON build of the
# programs, made by scripts/build-wheel.sh into build-wheel/. Its wheel is installed into a fresh virtual
# environment of each CPython under pyenv and used there (tests/wheel); the same build, packed by
# pack-build.sh with the main tree's simulated device, is validated by gpu-validate.sh: four scenarios
# show the package's programs, its adapter sources and its copy of the workload corpus at work. Exit
# status 3 of the validation (no PyTorch environment, or no CUDA 13 toolkit libraries) skips it, as
# ctest does for the build tree's dry run.
package_tier() {
    local build=$root/build-wheel status=0 wheel tarball interpreter pythons=() tester=""
    echo "== the wheel and the package for a GPU machine: static build, installed, packed, validated (at ${SECONDS} s)" >&2
    # scikit-build-core takes CMAKE_ARGS as a shell would split it.
    wheel=$(CMAKE_ARGS="$(printf "'%s' " "${line_tables[@]}")" "$root/scripts/build-wheel.sh" "$build")
    tarball=$(GPULEAK_PACK_SIMDEVICE="$root/build/simdevice" "$root/scripts/pack-build.sh" "$build")
    GPULEAK_VALIDATE_SIMULATED=1 GPULEAK_VALIDATE_JOBS=2 \
        GPULEAK_VALIDATE_SCENARIOS="leak_appended without_an_adapter workload_that first_run" \
        GPULEAK_VALIDATE_ADAPTER_DIR="$build/torch-adapter-cache" "$root/scripts/gpu-validate.sh" "$tarball" || status=$?
    if ((status == 3)); then
        echo "package: not validated (no PyTorch environment or CUDA 13 toolkit libraries here)" >&2
    elif ((status != 0)); then
        return "$status"
    fi
    # Every CPython 3.10+ under pyenv; 3.12 runs pytest and has Jupyter's packages (scripts/setup.sh).
    for interpreter in "${PYENV_ROOT:-$HOME/.pyenv}"/versions/3.*/bin/python3.*; do
        [[ $interpreter =~ /versions/3\.([0-9]+)\.[0-9]+/bin/python3\.[0-9]+$ ]] || continue
        ((BASH_REMATCH[1] >= 10)) || continue
        pythons+=("$interpreter")
        ((BASH_REMATCH[1] == 12)) && tester=$interpreter
    done
    if [[ -z $tester ]]; then
        echo "wheel: not tested (no CPython 3.12 under pyenv)" >&2
        return 0
    fi
    (IFS=:; GPULEAK_TEST_WHEEL=$wheel GPULEAK_TEST_PYTHONS="${pythons[*]}" GPULEAK_TEST_KERNEL_PYTHON=$tester \
        GPULEAK_TEST_SIMDEVICE_DIR="$root/build/simdevice" GPULEAK_TEST_PROGRAMS="$root/build/tests/programs" \
        GPULEAK_TEST_DUMP="$root/build/tests/tools/gpuleak-dump" \
        "$tester" -m pytest -q -rs -p no:cacheprovider "$root/tests/wheel")
}
package_tier

echo "== formatting (at ${SECONDS} s)" >&2
"$root/scripts/check-format.sh"
echo "== documentation site (at ${SECONDS} s)" >&2
"$root/scripts/docs.sh" "$root/build-docs"
echo "== done in ${SECONDS} s" >&2
