#!/usr/bin/env bash
# Installs the pinned TensorFlow (its CUDA 12 build, with Keras 3) and the rest of its dependency closure
# into a virtual environment of its own (tests/tensorflow runs TensorFlow programs there, on the simulated
# device); prints that environment's path on stdout. Idempotent and cached like scripts/setup-torch.sh
# (scripts/pinned-environment.sh): about 640 MB downloaded once, 2.1 GB installed.
#
# Why no NVIDIA wheels: `pip install tensorflow[and-cuda]` would add them (cuBLAS, cuDNN, NCCL, ...);
# plain `tensorflow` has the same GPU support and dlopens each CUDA library by soname (libcudart.so.12,
# libcublas.so.12, libcufft.so.11, ...), which LD_LIBRARY_PATH then finds: the simulated device's on the
# test bed, a CUDA 12 installation's on a machine with a GPU.
#
# Environment: GPULEAK_TENSORFLOW_DIR (the environment; default ~/.cache/gpuleak/tensorflow-<version>-py<X.Y>),
# GPULEAK_TENSORFLOW_PYTHON (the interpreter; default pyenv's newest CPython 3.12, else 3.13, 3.11, 3.10),
# GPULEAK_WHEEL_CACHE (downloaded wheels; default ~/.cache/gpuleak/wheels).
set -euo pipefail

readonly tensorflow_version=2.21.0
# The closure pip resolved for tensorflow==2.21.0 on CPython 3.12, pinned.
readonly requirements=(
    "tensorflow==${tensorflow_version}"
    keras==3.15.1
    absl-py==2.5.1
    astunparse==1.6.3
    certifi==2026.10.19.post1
    charset-normalizer==3.5.3
    flatbuffers==25.12.19
    gast==0.7.0
    google-pasta==0.2.0
    grpcio==1.85.4
    h5py==3.14.0
    idna==3.21
    libclang==18.1.1
    markdown-it-py==4.3.0
    mdurl==0.1.2
    ml_dtypes==0.7.0
    namex==0.1.0
    numpy==2.5.5
    opt_einsum==3.4.0
    optree==0.20.0
    packaging==26.4
    protobuf==7.36.2
    Pygments==2.21.0
    requests==2.34.2
    rich==15.0.0
    setuptools==84.2.1
    six==1.17.0
    termcolor==3.3.0
    typing_extensions==4.16.0
    urllib3==2.8.0
    wheel==0.48.0
    wrapt==2.5.2
)

# shellcheck source=scripts/pinned-environment.sh
source "$(dirname "${BASH_SOURCE[0]}")/pinned-environment.sh"

main() {
    local python dir
    python=${GPULEAK_TENSORFLOW_PYTHON:-$(pyenv_python tensorflow 12 13 11 10)}
    dir=$(pinned_environment_dir "$python" "tensorflow-${tensorflow_version}" "${GPULEAK_TENSORFLOW_DIR:-}")
    install_pinned_environment tensorflow "$python" "$dir" "${requirements[@]}"
    echo "$dir"
}

main "$@"
