#!/usr/bin/env bash
# Packs a build made with -DGPULEAK_STATIC_DEPS=ON into a tarball that scripts/gpu-validate.sh runs on
# another machine (one with a real GPU and PyTorch, no network, possibly without fmt, libunwind or
# elfutils). Prints the tarball's path on stdout.
#
#   scripts/pack-build.sh [BUILD_DIR] [TARBALL]
#   BUILD_DIR default build-static/ in the repository (configured and built first when it has no
#   libgpuleak.so), or the build of scripts/build-wheel.sh, which is one too; TARBALL default
#   BUILD_DIR/gpuleak-validate.tar.gz. GPULEAK_PACK_SIMDEVICE: the simulated device's build directory,
#   default BUILD_DIR/simdevice (a wheel's build has none: that of another tree of this machine serves).
#
# The package (one top directory, gpuleak-validate/) is gpuleak installed there (`cmake --install`, the
# layout a user's install has), plus what the validation runs:
#   bin/gpuleak, bin/gpuleak-report     fmt, elfutils and libstdc++ linked in, without debug information
#   lib/libgpuleak.so                   with libunwind.so.8 and liblzma.so.5 beside it, found by $ORIGIN
#                                       (Debian's libunwind.a is not position-independent)
#   share/gpuleak/python                the Python package, where the launcher looks for it
#   share/gpuleak/torch_adapter, share/gpuleak/include
#                                       what build-adapter.sh compiles for the torch there
#   simdevice/                          the simulated device's libraries and its python/ (dry runs)
#   tests/torch/, tests/workloads/      the PyTorch scenarios and their runner, the workload corpus
#   tests/jax/programs/,                the JAX and TensorFlow programs gpu-validate.sh checks verdicts on
#   tests/tensorflow/programs/
#   tests/analyzer/render/json/report_schema.py, docs/reference/report.schema.json
#                                       the JSON reports' schema, which the scenarios check their reports
#                                       against where jsonschema is installed
#   scripts/gpu-validate.sh             the validation itself
#   BUILD-INFO                          commit, compiler, and the newest glibc symbol versions needed
# It refuses a build whose programs still need fmt, libunwind or elfutils from the system.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build-static}
tarball=${2:-$build/gpuleak-validate.tar.gz}

if [[ ! -f $build/interpose/libgpuleak.so ]]; then
    "$root/scripts/build.sh" "$build" -DGPULEAK_STATIC_DEPS=ON >/dev/null
fi
if ! grep -q '^GPULEAK_STATIC_DEPS:BOOL=ON$' "$build/CMakeCache.txt"; then
    echo "pack-build: $build is not configured with -DGPULEAK_STATIC_DEPS=ON" >&2
    exit 1
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
package=$tmp/gpuleak-validate
# What cmake --install puts under a prefix; a wheel's build also installs its .pth file, which is the
# wheel's alone (a component of its own).
cmake --install "$build" --prefix "$package" --component Unspecified >/dev/null
if [[ ! -f $package/lib/libgpuleak.so ]]; then
    echo "pack-build: $build installs libgpuleak.so elsewhere than lib/ (CMAKE_INSTALL_LIBDIR), where gpu-validate.sh looks" >&2
    exit 1
fi
mkdir -p "$package"/{simdevice,tests/torch,scripts}
simdevice=${GPULEAK_PACK_SIMDEVICE:-$build/simdevice}
if [[ ! -f $simdevice/libcudart.so.13 ]]; then
    echo "pack-build: no simulated device in $simdevice (set GPULEAK_PACK_SIMDEVICE)" >&2
    exit 1
fi
cp -L "$simdevice"/lib*.so.* "$package/simdevice/"
cp -r "$simdevice/python" "$package/simdevice/"
cp "$root/tests/torch/test_torch_adapter.py" "$root/tests/torch/test_workloads.py" "$root/tests/torch/test_adapter_first_use.py" "$root/tests/torch/torch_environment.py" \
    "$root/tests/torch/scenario_runner.py" "$package/tests/torch/"
cp -r "$root/tests/workloads" "$package/tests/"
mkdir -p "$package/tests/jax" "$package/tests/tensorflow"
cp -r "$root/tests/jax/programs" "$package/tests/jax/"
cp -r "$root/tests/tensorflow/programs" "$package/tests/tensorflow/"
mkdir -p "$package/tests/analyzer/render/json" "$package/docs/reference"
cp "$root/tests/analyzer/render/json/report_schema.py" "$package/tests/analyzer/render/json/"
cp "$root/docs/reference/report.schema.json" "$package/docs/reference/"
cp "$root/scripts/gpu-validate.sh" "$package/scripts/"

# What the packed programs need from the system: none of fmt, libunwind, libdw, libelf, protobuf or zlib, and the
# library's libunwind and liblzma resolve to the copies beside it.
for program in "$package"/bin/* "$package/lib/libgpuleak.so"; do
    needed=$(readelf -d "$program" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p')
    foreign=$(grep -E '^lib(fmt|dw|elf|protobuf|protobuf-lite|z)\.' <<<"$needed" || true)
    if [[ $program == */bin/* ]]; then
        foreign+=$(grep -E '^lib(unwind|stdc\+\+)' <<<"$needed" || true)
    fi
    if [[ -n $foreign ]]; then
        echo "pack-build: $(basename "$program") still needs $(echo "$foreign" | tr '\n' ' ')from the system" >&2
        exit 1
    fi
done
unwind=$(ldd "$package/lib/libgpuleak.so" | awk '$1 == "libunwind.so.8" { print $3 }')
if [[ $unwind != "$package/lib/libunwind.so.8" ]]; then
    echo "pack-build: libgpuleak.so finds libunwind.so.8 at '$unwind', not beside it" >&2
    exit 1
fi

# The newest glibc the packed binaries need, and which symbols need it: the machine there must have at
# least that glibc. (On Debian 12: 2.36, for arc4random, which the static libstdc++ of GCC 12 calls; a
# package for older machines has to be built on an older distribution.)
newest_glibc() {
    local newest
    newest=$(objdump -T "$package"/bin/* "$package"/lib/*.so* | grep -o 'GLIBC_[0-9.]*' | sort -uV | tail -1)
    echo "$newest ($(objdump -T "$package"/bin/* "$package"/lib/*.so* | awk -v v="($newest)" '$0 ~ v { print $NF }' |
        sort -u | tr '\n' ' ' | sed 's/ $//'))"
}
{
    commit=$(git -C "$root" rev-parse HEAD 2>/dev/null || echo unknown)
    git -C "$root" diff --quiet HEAD 2>/dev/null || commit+=" (with local changes)"
    echo "commit: $commit"
    echo "built: $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(uname -srm), $(ldd --version | head -1)"
    echo "compiler: $(sed -n 's/^CMAKE_CXX_COMPILER:[A-Z]*=//p' "$build/CMakeCache.txt")"
    echo "needs at least: $(newest_glibc)"
} >"$package/BUILD-INFO"

mkdir -p "$(dirname "$tarball")"
tar -czf "$tarball" -C "$tmp" gpuleak-validate
size=$(stat -c %s "$tarball")
if ((size > 64 << 20)); then
    echo "pack-build: $tarball is $((size >> 20)) MiB, over the 64 MiB a carried build may take" >&2
    exit 1
fi
echo "pack-build: $((size >> 10)) KiB; $(grep '^needs' "$package/BUILD-INFO")" >&2
echo "$tarball"
