#!/usr/bin/env bash
# Builds gpuleak's PyTorch adapter for the torch that PYTHON imports, against that torch's own headers
# and C++ ABI, into the cache where libgpuleak.so looks for it; prints the library's path on stdout.
#
#   torch_adapter/build-adapter.sh [PYTHON]        (default: python3)
#
# The cache is $GPULEAK_TORCH_ADAPTER_DIR, else $XDG_CACHE_HOME/gpuleak/torch-adapter, else
# ~/.cache/gpuleak/torch-adapter; the library is <cache>/torch-<version>-<build id>/libgpuleak_torch-<hash>.so,
# the build id being libc10_cuda.so's: it names the exact binary whose class layouts the adapter was
# compiled for (and so its C++ ABI), and libgpuleak.so reads it from the loaded library without Python.
# The hash is the source's (the first 16 hex digits of the SHA-256 of the adapter's source and
# gpuleak.h, one after the other): libgpuleak.so, whose build computed the same, loads only an adapter
# of its own source. `gpuleak run` runs this script itself for a Python command when the adapter is
# missing (launcher/torch_adapter.cpp).
# It is built here, outside the traced program, because a build inside it would run a compiler for
# seconds at the program's first CUDA allocation, with PyTorch's allocator lock held.
#
# Environment: CXX (default c++), CXXFLAGS (added to the compiler's flags; gpuleak's own tests add
# -Werror, which a user's newer compiler could trip on), CUDA_HOME (CUDA headers, which torch's headers
# include; default /usr/local/cuda). Idempotent: an adapter already built from the same source is kept.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
python=${1:-python3}
cxx=${CXX:-c++}
cuda_home=${CUDA_HOME:-/usr/local/cuda}

# One line: version, C++ ABI flag, torch's include directory, its library directory.
if ! read -r version abi include lib < <("$python" -c '
import os, torch
print(torch.__version__, int(torch._C._GLIBCXX_USE_CXX11_ABI),
      os.path.join(os.path.dirname(torch.__file__), "include"),
      os.path.join(os.path.dirname(torch.__file__), "lib"))'); then
    echo "build-adapter: $python cannot import torch" >&2
    exit 1
fi

build_id=$(readelf -n "$lib/libc10_cuda.so" | awk '/Build ID:/ { print $3; exit }')
if [[ -z $build_id ]]; then
    echo "build-adapter: $lib/libc10_cuda.so has no GNU build id" >&2
    exit 1
fi

cache=${GPULEAK_TORCH_ADAPTER_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/gpuleak/torch-adapter}
dir=$cache/torch-${version}-${build_id}
source=$here/gpuleak_torch_adapter.cpp
hash=$(cat "$source" "$here/../include/gpuleak/gpuleak.h" | sha256sum | cut -c1-16)
library=$dir/libgpuleak_torch-$hash.so
if [[ -f $library ]]; then
    echo "$library"
    exit 0
fi

mkdir -p "$dir"
# Built under a temporary name and renamed: a traced process never dlopens half a library.
temporary=$(mktemp "$dir/.libgpuleak_torch.XXXXXX")
trap 'rm -f "$temporary"' EXIT
# torch's headers are system headers here: their own warnings are not the adapter's.
# The adapter needs libc10_cuda.so and libc10.so, found by soname among the objects already loaded
# when libgpuleak.so dlopens it, hence no rpath.
read -r -a extra_flags <<<"${CXXFLAGS:-}"
"$cxx" -std=c++17 -O2 -g -fPIC -shared -Wall -Wextra ${extra_flags[@]+"${extra_flags[@]}"} \
    -D_GLIBCXX_USE_CXX11_ABI="$abi" \
    -isystem "$include" -isystem "$cuda_home/include" -I "$here/../include" \
    -o "$temporary" "$source" \
    -L "$lib" -lc10_cuda -lc10
mv -f "$temporary" "$library"
echo "$library"
