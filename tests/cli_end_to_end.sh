#!/usr/bin/env bash
# The wspipe program end to end, as a user runs it: exit codes, the outcome
# each variant promises, printed replay commands that reproduce exactly, and
# the trace file. Needs $WSPIPE (the built program) and python3.
set -euo pipefail
W=${WSPIPE:?set WSPIPE to the wspipe binary}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
json_field() { python3 -c 'import json,sys; print(json.load(sys.stdin)[sys.argv[1]])' "$1"; }

# 1. every strategy explores the correct ring without a finding
for s in rr random pct; do
  "$W" explore ring --runs 1000 --strategy "$s" >"$tmp/out" 2>"$tmp/err" || fail "explore ring --strategy $s: exit $?"
done

# 2. each variant exits 1 within 100 runs with the outcome `wspipe list` promises,
#    and its printed replay command reproduces it when run exactly as printed
"$W" list >"$tmp/list"
n=0
while read -r name expect _; do
  [[ "$name" == ring/* ]] || continue
  want=${expect#expect=}
  for s in random pct; do
    set +e; "$W" explore "$name" --runs 100 --strategy "$s" --json >"$tmp/j" 2>/dev/null; rc=$?; set -e
    [[ $rc == 1 ]] || fail "$name ($s): exit $rc, expected 1"
    got=$(json_field outcome <"$tmp/j")
    [[ "$got" == "$want" ]] || fail "$name ($s): outcome $got, list promises $want"
    step=$(json_field steps <"$tmp/j")
    replay=$(json_field replay <"$tmp/j")
    set +e; eval "$replay --json" >"$tmp/r"; rc=$?; set -e
    [[ $rc == 1 ]] || fail "$name: replay exit $rc"
    [[ "$(json_field outcome <"$tmp/r")" == "$want" ]] || fail "$name: replay outcome differs"
    [[ "$(json_field steps <"$tmp/r")" == "$step" ]] || fail "$name: replay stopped at another step"
    # the text form prints the same command
    set +e; eval "$replay" >"$tmp/t"; set -e
    grep -q "^replay:   " "$tmp/t" || fail "$name: text report has no replay line"
  done
  n=$((n + 1))
done <"$tmp/list"
[[ $n -ge 3 ]] || fail "list printed only $n broken ring variants"

# 3. the trace: Chrome JSON with one track per warp; same seed, same bytes
"$W" run ring --seed 7 --trace "$tmp/t1.json" >/dev/null
"$W" run ring --seed 7 --trace "$tmp/t2.json" >/dev/null
cmp -s "$tmp/t1.json" "$tmp/t2.json" || fail "same seed gave different trace bytes"
python3 - "$tmp/t1.json" <<'PY'
import json, sys
t = json.load(open(sys.argv[1]))
ev = t["traceEvents"]
for e in ev:
    for k in ("ph", "pid", "tid"):
        assert k in e, (k, e)
    if e["ph"] != "M":
        assert "ts" in e, e
tracks = {(e["pid"], e["tid"]) for e in ev if e["ph"] == "X"}
names = {(e["pid"], e["tid"]): e["args"]["name"] for e in ev if e["ph"] == "M" and e["name"] == "thread_name"}
assert len(tracks) == 2 and set(names) == tracks, (tracks, names)
PY
"$W" run ring --seed 7 --trace "$tmp/t.txt" >/dev/null
grep -q "arrive full\[0\]" "$tmp/t.txt" || fail "text trace lacks arrivals"

# 4. bad usage exits 2 with a message naming what is wrong
expect_usage() {
  local what=$1; shift
  set +e; "$W" "$@" >/dev/null 2>"$tmp/e"; rc=$?; set -e
  [[ $rc == 2 ]] || fail "'$*' exit $rc, expected 2"
  grep -qi -- "$what" "$tmp/e" || fail "'$*' message does not name '$what': $(cat "$tmp/e")"
}
expect_usage "unknown scenario" run nosuch
expect_usage "no variant" run ring/nosuch
expect_usage "stages" run ring --stages 99
expect_usage "items" run ring --items x
expect_usage "unknown option" run ring --bogus 1
expect_usage "strategy" run ring --strategy fifo
expect_usage "runs" explore ring
expect_usage "schedule" replay ring
expect_usage "schedule" replay ring --schedule 9:abc
expect_usage "unused" replay ring --schedule 1:b3a2b3 --items 64 --stages 1
expect_usage "cannot move" replay ring --schedule 1:{9}b3 --items 64
expect_usage "unknown command" frobnicate
echo "cli end-to-end: ok"
