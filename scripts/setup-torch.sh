#!/usr/bin/env bash
# Installs the pinned PyTorch CUDA wheel, and only what `import torch` and the tests under tests/torch
# need (transformers and Lightning for the corpus's third-party programs), into a virtual environment of
# its own; prints that environment's path on stdout. Idempotent: a complete environment is reused
# without touching the network, and the downloaded wheels are cached, so a rebuilt environment costs no
# download either.
#
# Why torch 2.11.0: it is the release whose default PyPI wheel is built against CUDA 13.0 (+cu130) and
# whose CUDA dependencies are exactly the libraries of the CUDA 13.0 toolkit installed here (cuda-toolkit
# 13.0.2: cuBLAS 13.1.0.3, cuFFT 12.0.0.61, cuSPARSE 12.6.3.3, ...; cuDNN 9.19.0.56 and NCCL 2.28.9,
# see /usr/local/cuda/dist-info), so /usr/local/cuda/lib64 serves every CUDA library it links against
# but three. Later releases (2.12-2.14 on CUDA 13.0, 2.15 on 13.2) want newer cuDNN and NCCL symbols
# than the toolkit has. The three the toolkit lacks (cuSPARSELt, NVSHMEM, cuFile) come from their wheels,
# which land where torch's RUNPATH looks ($ORIGIN/../../nvidia/...). The CUDA runtime is deliberately
# not installed: simdevice's libcudart.so.13 stands in for it.
#
# Environment: GPULEAK_TORCH_DIR (the environment; default ~/.cache/gpuleak/torch-<version>-py<X.Y>),
# GPULEAK_TORCH_PYTHON (the interpreter; default pyenv's newest CPython 3.12, else 3.13, 3.11, 3.10),
# GPULEAK_WHEEL_CACHE (downloaded wheels; default ~/.cache/gpuleak/wheels).
set -euo pipefail

readonly torch_version=2.11.0
# Everything is installed with --no-deps from this list, so the environment is the same on every machine.
readonly requirements=(
    "torch==${torch_version}"
    # The CUDA libraries torch links against that the CUDA 13.0 toolkit does not ship.
    nvidia-cusparselt-cu13==0.8.0
    nvidia-nvshmem-cu13==3.4.5
    nvidia-cufile==1.15.1.6
    # What `import torch` imports (its Requires-Dist without the CUDA wheels and triton).
    filelock==4.3.1
    typing-extensions==4.16.0
    sympy==1.14.0
    mpmath==1.3.0
    networkx==3.7
    jinja2==3.1.6
    markupsafe==3.0.4
    fsspec==2026.9.0
    setuptools==81.0.0
    # The tests; numpy for the DataLoader scenarios that hold their dataset in an array (and any 3.10-3.13).
    numpy==2.2.6
    pytest==9.2.0
    iniconfig==2.3.1
    packaging==26.4
    pluggy==1.7.0
    pygments==2.21.0
    # A notebook with PyTorch in gpuleak's kernel (tests/torch/test_notebook.py): the ipykernel, IPython
    # and jupyter_client that scripts/setup.sh pins for tests/jupyter, and what they import.
    ipykernel==7.4.0
    ipython==9.18.1
    jupyter_client==8.10.0
    asttokens==3.0.2
    comm==0.2.3
    debugpy==1.8.22
    executing==2.3.0
    ipython_pygments_lexers==1.1.1
    jedi==0.20.1
    jupyter_core==5.9.1
    matplotlib-inline==0.2.2
    nest-asyncio2==1.7.4
    parso==0.8.7
    pexpect==4.9.0
    platformdirs==4.14.9
    prompt_toolkit==3.0.53
    psutil==7.2.2
    ptyprocess==0.7.0
    pure_eval==0.2.4
    python-dateutil==4.0.0
    pyzmq==27.3.0
    stack-data==0.6.3
    tornado==6.6.1
    traitlets==5.16.1
    tzdata==2026.6
    wcwidth==0.9.4
    # The corpus's programs whose model or loop someone else wrote (tests/workloads/gpt2_*.py,
    # lightning_*.py): Hugging Face transformers and PyTorch Lightning, and what importing them imports
    # (their Requires-Dist without what they never load: typer, kernels, hf-xet, fsspec's http extra).
    transformers==5.25.0
    huggingface-hub==2.4.0
    tokenizers==0.23.3
    safetensors==0.8.0
    regex==2026.12.2
    pyyaml==6.0.4
    tqdm==4.70.1
    httpx2==2.17.0
    httpcore2==2.17.0
    h11==0.16.0
    idna==3.21
    truststore==0.10.5
    lightning==2.6.6
    lightning-utilities==0.15.3
    torchmetrics==1.9.0
)

# shellcheck source=scripts/pinned-environment.sh
source "$(dirname "${BASH_SOURCE[0]}")/pinned-environment.sh"

# gpuleak's PyTorch adapter for this torch, into the cache libgpuleak.so looks in, so that a traced
# PyTorch program gets tensor-level data from its first run (torch_adapter/build-adapter.sh; a no-op
# when built already). Without a compiler or CUDA headers the environment is still complete: traced
# programs then record segments only, with one warning.
prebuild_adapter() {
    "$(dirname "${BASH_SOURCE[0]}")/../torch_adapter/build-adapter.sh" "$1/bin/python" >/dev/null ||
        echo "setup-torch: could not build gpuleak's PyTorch adapter; traces of PyTorch will hold segments only" >&2
}

main() {
    local python dir
    python=${GPULEAK_TORCH_PYTHON:-$(pyenv_python torch 12 13 11 10)}
    dir=$(pinned_environment_dir "$python" "torch-${torch_version}" "${GPULEAK_TORCH_DIR:-}")
    install_pinned_environment torch "$python" "$dir" "${requirements[@]}"
    prebuild_adapter "$dir"
    echo "$dir"
}

main "$@"
