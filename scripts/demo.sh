#!/usr/bin/env bash
# The demo: sets up, builds, and runs a PyTorch training loop that keeps every step's loss tensor
# (tests/workloads/leak_losses_append.py: `losses.append(loss)`) under `gpuleak run` on the simulated
# CUDA device, then shows the run's report. Where the set-up installed no PyTorch (no CUDA 13 toolkit
# here, or GPULEAK_SKIP_TORCH=1), a small C++ "training loop" that leaks one buffer per epoch stands in.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=$root/build
"$root/scripts/setup.sh"
"$root/scripts/build.sh" "$build"

out=$(mktemp -d "${TMPDIR:-/tmp}/gpuleak-demo.XXXXXX")
cuda_lib_dir=${GPULEAK_CUDA_LIB_DIR:-/usr/local/cuda/lib64}
torch_environment=""
if [[ ${GPULEAK_SKIP_TORCH:-0} != 1 && -e $cuda_lib_dir/libcublas.so.13 ]]; then
    torch_environment=$("$root/scripts/setup-torch.sh")
fi

if [[ -n $torch_environment ]]; then
    workload=$root/tests/workloads/leak_losses_append.py
    echo "== gpuleak run -- python ${workload#"$root/"}   (PyTorch on the simulated CUDA device, no GPU needed)" >&2
    # The test bed: the simulated libraries first, the toolkit's for the rest of torch's CUDA libraries,
    # and its Python half, which keeps PyTorch off cuDNN.
    LD_LIBRARY_PATH="$build/simdevice:$cuda_lib_dir" PYTHONPATH="$build/simdevice/python" PYTHONWARNINGS=ignore \
        "$build/launcher/gpuleak" run --quiet -o "$out/run" -- "$torch_environment/bin/python" "$workload"
    echo "== $out/run/report.txt" >&2
    cat "$out/run/report.txt"
else
    echo "== running the demo training loop under gpuleak (simulated CUDA device, no GPU needed)" >&2
    GPULEAK_OUTPUT="$out/demo.%p.trace" LD_PRELOAD="$build/interpose/libgpuleak.so" \
        "$build/tests/programs/demo_training" 10
    trace=$(ls "$out"/demo.*.trace)
    echo "== gpuleak-report $trace" >&2
    "$build/analyzer/gpuleak-report" "$trace"
fi
