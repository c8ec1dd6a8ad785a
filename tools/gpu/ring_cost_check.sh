#!/usr/bin/env bash
# ring_cost_check.sh OBJECT...: the SASS side of the abstraction's cost.
# For each configuration of ring_cost.cu and each architecture in the
# objects (sm_90a, sm_100a), the instructions of the ring written with core/
# (wspipe_cost_core_s<S>_w<W>) against the same ring written by hand with raw
# PTX (wspipe_cost_raw_s<S>_w<W>), counted up to the self-branch that ends
# each function; fails if any ratio core / hand-written exceeds 1.02.
# Exit 77 (CTest skip) without cuobjdump, as sass_check.sh.
set -u
[ "$#" -ge 1 ] || { echo "usage: $0 OBJECT..." >&2; exit 2; }
source "$(dirname "${BASH_SOURCE[0]}")/find_cuobjdump.sh"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for f in "$@"; do
  "$cuobjdump" -sass "$f" >>"$tmp/sass" 2>"$tmp/err" || { cat "$tmp/err" >&2; exit 1; }
  grep -q nvdisasm "$tmp/err" && { echo "SKIP: cuobjdump cannot run nvdisasm"; exit 77; }
done
# "<arch> <function> <instructions>", each function up to its self-branch.
awk '
  /\.headerflags/ { arch = "?"; if (match($0, /EF_CUDA_SM[0-9]+/)) arch = "sm_" substr($0, RSTART + 10, RLENGTH - 10) "a" }
  /Function :/ { fn = $3; done = 0; next }
  /^[ \t]*\/\*[0-9a-f]+\*\// {
    if (done || fn !~ /^wspipe_cost_/) next
    line = $0; addr = line
    sub(/^[ \t]*\/\*/, "", addr); sub(/\*\/.*$/, "", addr); sub(/^0+/, "", addr); if (addr == "") addr = "0"
    sub(/^[ \t]*\/\*[0-9a-f]+\*\/[ \t]*/, "", line); sub(/[ \t]*\/\*.*$/, "", line); sub(/[ \t]*;[ \t]*$/, "", line)
    if (line ~ /^BRA 0x[0-9a-f]+$/ && substr(line, 7) == addr) { done = 1; next }
    if (line != "") n[arch " " fn]++
  }
  END { for (k in n) print k, n[k] }' "$tmp/sass" | sort >"$tmp/counts"
[ -s "$tmp/counts" ] || { echo "ring_cost_check: no wspipe_cost_* kernels in $*" >&2; exit 1; }
failures=0
checks=0
printf '%-8s %-10s %6s %6s %6s\n' arch config core raw ratio
while read -r arch fn core; do
  [[ $fn == wspipe_cost_core_* ]] || continue
  config=${fn#wspipe_cost_core_}
  raw=$(awk -v a="$arch" -v f="wspipe_cost_raw_$config" '$1 == a && $2 == f { print $3 }' "$tmp/counts")
  checks=$((checks + 1))
  if [ -z "$raw" ]; then
    echo "FAIL: $arch $config: no hand-written kernel"
    failures=$((failures + 1))
    continue
  fi
  ratio=$(awk -v c="$core" -v r="$raw" 'BEGIN { printf "%.3f", c / r }')
  printf '%-8s %-10s %6d %6d %6s\n' "$arch" "$config" "$core" "$raw" "$ratio"
  if awk -v c="$core" -v r="$raw" 'BEGIN { exit !(c > 1.02 * r) }'; then
    echo "FAIL: $arch $config: core/ costs $core instructions against $raw by hand (ratio $ratio > 1.02)"
    failures=$((failures + 1))
  fi
done <"$tmp/counts"
[ "$failures" -eq 0 ] || { echo "ring_cost_check: $failures of $checks over 1.02"; exit 1; }
echo "ring_cost_check: all $checks ratios <= 1.02"
