#!/usr/bin/env bash
# compile_fail_check.sh NVCC SOURCE_ROOT: on sm_90a, HopperBackend refuses
# Tensor Memory, tcgen05 and .cta_group::2 at compile time with a message
# that names the operation and the architecture, and so does CudaBackend
# compiled in an sm_90a pass (hopper_reject.cu, one case per operation).
# Each case must fail to compile with its message, never a ptxas error; the
# case with no operation (0) must compile.
set -u
nvcc=$1
root=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failures=0
compile() {  # compile CASE: nvcc's output in $tmp/out, its status returned
  "$nvcc" -std=c++20 -gencode arch=compute_90a,code=sm_90a -I "$root" -DWSPIPE_REJECT_CASE="$1" \
    -c "$root/tools/gpu/hopper_reject.cu" -o "$tmp/o.o" >"$tmp/out" 2>&1
}
expect_reject() {  # expect_reject CASE REGEX WHAT
  if compile "$1"; then
    echo "  FAIL  case $1 ($3): compiled"
    failures=$((failures + 1))
  elif grep -Eq -- "$2" "$tmp/out" && ! grep -q ptxas "$tmp/out"; then
    echo "  ok    case $1 ($3): $(grep -Eo -- "$2" "$tmp/out" | head -n 1)"
  else
    echo "  FAIL  case $1 ($3): no /$2/ in nvcc's output (or a ptxas error):"
    sed 's/^/        /' "$tmp/out" | head -n 20
    failures=$((failures + 1))
  fi
}
if compile 0; then
  echo "  ok    case 0: the arch-neutral kernel compiles for sm_90a"
else
  echo "  FAIL  case 0: the arch-neutral kernel does not compile for sm_90a:"
  sed 's/^/        /' "$tmp/out" | head -n 20
  failures=$((failures + 1))
fi
expect_reject 1 'HopperBackend \(sm_90a\) has no tmem_alloc \(tcgen05\.alloc\)' 'tmem_alloc'
expect_reject 2 'HopperBackend \(sm_90a\) has no mma \(tcgen05\.mma\)' 'mma'
expect_reject 3 'HopperBackend \(sm_90a\) has no \.cta_group::2 TMA loads' 'tma_load<2>'
expect_reject 4 'TensorMemoryBackend' 'TmemAllocation<HopperBackend>'
expect_reject 6 'HopperBackend \(sm_90a\) has no clc_try_cancel \(clusterlaunchcontrol\.try_cancel\)' 'clc_try_cancel'
expect_reject 7 'HopperBackend \(sm_90a\) has no clc_is_canceled' 'clc_is_canceled'
expect_reject 5 'CudaBackend: tmem_wait_load \(tcgen05\.wait::ld\) is compiled in a device pass that is not sm_100a' \
  'CudaBackend in an sm_90a pass'
[ "$failures" -eq 0 ] && echo "compile_fail_check: all refused as expected" && exit 0
echo "compile_fail_check: $failures case(s) wrong"
exit 1
