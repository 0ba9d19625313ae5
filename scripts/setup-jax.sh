#!/usr/bin/env bash
# Installs the pinned JAX with its CUDA 13 plugin, and only what `import jax` needs, into a virtual
# environment of its own (tests/jax runs JAX programs there, on the simulated device); prints that
# environment's path on stdout. Idempotent and cached like scripts/setup-torch.sh (scripts/
# pinned-environment.sh): about 300 MB downloaded once, 1 GB installed.
#
# Why no NVIDIA wheels: `pip install jax[cuda13]` would add 3.4 GB of them (cuBLAS, cuDNN, NCCL, ...),
# which the plugin finds through its RPATH (site-packages/nvidia/...). It has no NEEDED CUDA library: it
# dlopens each by soname, and where its RPATH holds none, the dynamic linker's search path serves it. So
# on the test bed LD_LIBRARY_PATH finds the simulated libcuda, libcudart, cuBLAS and NVML first and the
# toolkit's libraries after them, as for PyTorch; on a machine with a GPU the toolkit's alone serve it.
#
# Environment: GPULEAK_JAX_DIR (the environment; default ~/.cache/gpuleak/jax-<version>-py<X.Y>),
# GPULEAK_JAX_PYTHON (the interpreter; default pyenv's newest CPython 3.12, else 3.13, 3.11),
# GPULEAK_WHEEL_CACHE (downloaded wheels; default ~/.cache/gpuleak/wheels).
set -euo pipefail

readonly jax_version=0.12.0.1
readonly requirements=(
    "jax==${jax_version}"
    "jaxlib==${jax_version}"
    "jax-cuda13-plugin==${jax_version}"
    "jax-cuda13-pjrt==${jax_version}"
    # What `import jax` imports (their Requires-Dist without the NVIDIA wheels).
    ml_dtypes==0.7.0
    numpy==2.5.5
    opt_einsum==3.4.0
    scipy==1.18.1
)

# shellcheck source=scripts/pinned-environment.sh
source "$(dirname "${BASH_SOURCE[0]}")/pinned-environment.sh"

main() {
    local python dir
    python=${GPULEAK_JAX_PYTHON:-$(pyenv_python jax 12 13 11)}
    dir=$(pinned_environment_dir "$python" "jax-${jax_version}" "${GPULEAK_JAX_DIR:-}")
    install_pinned_environment jax "$python" "$dir" "${requirements[@]}"
    echo "$dir"
}

main "$@"
