#!/usr/bin/env bash
# tools/silicon.sh [ARGS...]: build wspipe_silicon (tools/gpu/silicon.cu)
# with nvcc alone and run it: `all` by default, or the ARGS given
# (ring | tile-reduce | tma-store | clusters | variants | conformance
# [--seed S] [--count N] | conformance-mw [--seed S] [--count N] [--reps R]);
# `tools/silicon.sh ring-cost [ITEMS] [REPS]` builds and runs the
# abstraction's cost benchmark (tools/gpu/ring_cost.cu) instead. For a GPU machine
# that has the CUDA toolkit but not the rest of wspipe's dependencies (no
# Boost, no GoogleTest); where those exist, the cuda preset builds the same
# program and CTest runs it (label gpu). Needs an sm_90 or later GPU; the
# build targets sm_90a, or $WSPIPE_SILICON_ARCH (e.g. 100a). Results go to
# $WSPIPE_SILICON_OUT (default: build/silicon).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
nvcc=${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
arch=${WSPIPE_SILICON_ARCH:-90a}
out=${WSPIPE_SILICON_OUT:-$root/build/silicon}
mkdir -p "$out" "$root/build"
if [ "${1:-}" = ring-cost ]; then
  shift
  echo "[silicon] $nvcc -gencode arch=compute_$arch,code=sm_$arch tools/gpu/ring_cost.cu" >&2
  "$nvcc" -std=c++20 -O3 -gencode "arch=compute_$arch,code=sm_$arch" -I "$root" \
    "$root/tools/gpu/ring_cost.cu" -o "$root/build/wspipe_ring_cost"
  exec "$root/build/wspipe_ring_cost" "$@"
fi
echo "[silicon] $nvcc -gencode arch=compute_$arch,code=sm_$arch tools/gpu/silicon.cu" >&2
"$nvcc" -std=c++20 -O2 -gencode "arch=compute_$arch,code=sm_$arch" -I "$root" \
  "$root/tools/gpu/silicon.cu" -o "$root/build/wspipe_silicon"
[ "$#" -gt 0 ] || set -- all
WSPIPE_SILICON_OUT=$out exec "$root/build/wspipe_silicon" "$@"
