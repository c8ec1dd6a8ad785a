#!/usr/bin/env bash
# The acceptance runs of the warp-specialized examples, exactly as a user
# types them: every correct configuration explores 200 schedules without a
# finding (the result checked against the CPU reference after each run), and
# every broken variant exits 1 within 500 runs of its default strategy with
# the outcome `wspipe list` promises, which `--json` reports as its outcome.
# Needs $WSPIPE (the built program) and python3; $EXPLORE_RUNS overrides the
# 200 runs of the correct configurations (a sanitizer build uses fewer).
set -euo pipefail
W=${WSPIPE:?set WSPIPE to the wspipe binary}
RUNS=${EXPLORE_RUNS:-200}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
json_field() { python3 -c 'import json,sys; print(json.load(sys.stdin)[sys.argv[1]])' "$1"; }

"$W" list >"$tmp/list"
scenarios=$(awk '$1 !~ /\// && $2 == "expect=ok" && $1 != "ring" {print $1}' "$tmp/list")
[[ -n "$scenarios" ]] || fail "wspipe list shows no example scenarios"

# 1. correct kernels: $RUNS (200) runs each, cta_group 1 and 2 (gemm: both dtypes,
# cluster shapes 2x1, 4x1 and 2x2; tile-reduce: clusters of 1 and 2, the
# weights loaded by TMA with loads completing in any order;
# tmem-coresident: 1, 2 and 4 CTAs per SM; pingpong: tiles shorter and
# longer than the ring, groups of 1 to 4 warps, waits by parity alone;
# persistent-gemm: CLC with 1 and 2
# response stages and the static schedule, every cluster shape)
for s in $scenarios; do
  configs=("--cta-group 1" "--cta-group 2")
  [[ "$s" == tile-reduce ]] && configs=("--cluster 1" "--cluster 2" "--cluster 2 --clusters 2 --stages 1"
                                         "--weights loaded --async-reorder" "--weights loaded --cluster 2 --async-reorder")
  [[ "$s" == tmem-coresident ]] && configs=("--ctas-per-sm 1" "--ctas-per-sm 2" "--ctas-per-sm 4 --clusters 8 --cols 128")
  [[ "$s" == pingpong ]] && configs=("--stages 2" "--stages 1 --k-blocks 2" "--stages 4 --k-blocks 1 --tiles 7"
                                     "--stages 3 --k-blocks 5 --group-warps 1" "--group-warps 4 --k-blocks 6"
                                     "--waits parity" "--waits parity --stages 3 --k-blocks 7")
  [[ "$s" == gemm ]] && configs=("--cta-group 1 --dtype bf16" "--cta-group 1 --dtype fp8"
                                 "--cta-group 2 --dtype bf16" "--cta-group 2 --dtype fp8"
                                 "--cluster 2" "--manual-a 1"
                                 "--cluster 4 --m 512" "--cluster 2 --cluster-y 2 --n 128"
                                 "--cta-group 2 --cluster 4 --m 512" "--cta-group 2 --cluster 2 --cluster-y 2 --n 128")
  [[ "$s" == persistent-gemm ]] && configs=("--cta-group 1" "--cta-group 1 --clc-stages 1 --m 384 --clusters 3"
                                            "--cta-group 1 --clc-stages 0" "--cta-group 1 --cluster 2 --m 512"
                                            "--cta-group 2 --m 512" "--cta-group 2 --clc-stages 0 --m 512"
                                            "--cta-group 1 --cluster 4 --m 512" "--cta-group 2 --cluster 4 --m 1024"
                                            "--cta-group 1 --cluster 2 --cluster-y 2 --m 512 --n 256"
                                            "--cta-group 2 --cluster 2 --cluster-y 2 --m 256 --n 256")
  for c in "${configs[@]}"; do
    # shellcheck disable=SC2086
    set +e; "$W" explore "$s" --runs "$RUNS" $c >"$tmp/out" 2>&1; rc=$?; set -e
    [[ $rc == 0 ]] || { cat "$tmp/out" >&2; fail "explore $s $c: exit $rc"; }
    grep -q "nothing found" "$tmp/out" || fail "explore $s $c: no summary"
    echo "ok: explore $s --runs $RUNS $c"
  done
done

# 2. broken variants: exit 1 within 500 runs, with the promised outcome
n=0
while read -r name expect _; do
  [[ "$name" == */* && "$name" != ring/* ]] || continue
  want=${expect#expect=}
  set +e; "$W" explore "$name" --runs 500 --json >"$tmp/j" 2>"$tmp/err"; rc=$?; set -e
  [[ $rc == 1 ]] || fail "$name: exit $rc, expected 1"
  got=$(json_field outcome <"$tmp/j")
  [[ ",$want," == *",$got,"* ]] || fail "$name: outcome $got, list promises $want"
  [[ "$(json_field status <"$tmp/j")" != ok ]] || fail "$name: status ok"
  echo "ok: $name -> $got after $(json_field runs <"$tmp/j") run(s)"
  n=$((n + 1))
done <"$tmp/list"
[[ $n -ge 14 ]] || fail "only $n broken example variants listed"
echo "examples: all acceptance runs passed ($n broken variants)"
