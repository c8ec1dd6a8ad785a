#!/usr/bin/env bash
# The wspipe program end to end, as a user runs it: exit codes, the outcome
# each variant promises, printed replay commands that reproduce exactly, and
# the trace file. Needs $WSPIPE (the built program) and python3.
set -euo pipefail
W=${WSPIPE:?set WSPIPE to the wspipe binary}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cd "$tmp"  # a long run's schedule file goes to the current directory
fail() { echo "FAIL: $*" >&2; exit 1; }
json_field() { python3 -c 'import json,sys; print(json.load(sys.stdin)[sys.argv[1]])' "$1"; }

# 1. every strategy explores the correct ring without a finding; the default
#    budget is time, so explore needs no --runs
for s in rr random pct stall random,pct:2,pct:5; do
  "$W" explore ring --runs 1000 --strategy "$s" >"$tmp/out" 2>"$tmp/err" || fail "explore ring --strategy $s: exit $?"
done
"$W" explore ring --seconds 1 >"$tmp/out" 2>"$tmp/err" || fail "explore ring --seconds 1: exit $?"
# the MMA memo changes speed, never results: off, it explores gemm just as clean
"$W" explore gemm --runs 3 --jobs 1 --mma-memo-mib 0 >"$tmp/out" 2>"$tmp/err" || fail "explore gemm --mma-memo-mib 0: exit $?"
grep -q "nothing found" "$tmp/out" || fail "explore gemm --mma-memo-mib 0 printed no summary"
grep -q "nothing found" "$tmp/out" || fail "explore ring --seconds 1 printed no summary"

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
    # the failure is shrunk: no more preemptions than found, and the JSON says so
    python3 - "$tmp/j" <<'PY' || fail "$name ($s): shrink figures missing or grew"
import json, sys
s = json.load(open(sys.argv[1]))["shrink"]
assert s["preemptions_after"] <= s["preemptions_before"], s
assert s["choices_after"] <= s["choices_before"] or s["preemptions_after"] < s["preemptions_before"], s
PY
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

# 2b. the bounded exhaustive search covers ring --stages 2 --items 4 with 2
#     preemptions, and finds every broken ring variant
"$W" explore ring --stages 2 --items 4 --strategy exhaustive --preemptions 2 --json >"$tmp/j" ||
  fail "exhaustive ring: exit $?"
[[ "$(json_field complete <"$tmp/j")" == True ]] || fail "exhaustive ring did not complete"
[[ "$(json_field verdict <"$tmp/j")" == verified ]] || fail "exhaustive ring: verdict $(json_field verdict <"$tmp/j")"
# A verdict names what it assumed: the preemption bound first, in the JSON
# and under the report's verdict.
json_field assumptions <"$tmp/j" | grep -q "at most 2 preemption(s) per schedule" ||
  fail "exhaustive ring: assumptions $(json_field assumptions <"$tmp/j")"
"$W" explore ring --stages 2 --items 4 --strategy exhaustive --no-spurious-try-wait >"$tmp/o" 2>/dev/null ||
  fail "exhaustive ring --no-spurious-try-wait: exit $?"
grep -A3 "^verdict:  verified" "$tmp/o" | grep -q "^assuming: .*(--no-spurious-try-wait)" ||
  fail "exhaustive ring --no-spurious-try-wait: no assumption line: $(cat "$tmp/o")"
# An exhaustive search cut short by its budget is incomplete: exit 5, never a pass.
set +e; "$W" explore ring --stages 2 --items 4 --strategy exhaustive --preemptions 2 --runs 3 >"$tmp/o" 2>/dev/null
rc=$?; set -e
[[ $rc == 5 ]] || fail "exhaustive ring --runs 3: exit $rc, expected 5"
grep -q "^verdict:  incomplete" "$tmp/o" || fail "exhaustive ring --runs 3: $(cat "$tmp/o")"
# Every class of the correct ring's schedules is one run: "1 run", in the
# summary and the progress line alike.
"$W" explore ring --stages 2 --items 4 --strategy exhaustive >"$tmp/o" 2>"$tmp/err" || fail "exhaustive ring: exit $?"
grep -q "^explored 1 run (" "$tmp/o" || fail "exhaustive ring: $(cat "$tmp/o")"
grep -q ": 1 run, " "$tmp/err" || fail "exhaustive ring's progress: $(cat "$tmp/err")"
"$W" explore ring --runs 20 --json >"$tmp/j"
[[ "$(json_field verdict <"$tmp/j")" == explored ]] || fail "sampled ring: verdict $(json_field verdict <"$tmp/j")"
for v in no-release over-arrive producer-phase-0 $(grep -o '^ring/early-release' "$tmp/list" | cut -d/ -f2); do
  set +e; "$W" explore ring/$v --stages 2 --items 4 --strategy exhaustive --preemptions 2 --json >"$tmp/j" 2>/dev/null
  rc=$?; set -e
  [[ $rc == 1 ]] || fail "exhaustive ring/$v: exit $rc, expected 1"
done

# 2c. --jobs does not change what is found: the same run, the same shrunk
#     schedule
for j in 1 2; do
  set +e; "$W" explore ring/over-arrive --runs 50 --jobs $j --json >"$tmp/j$j" 2>/dev/null; set -e
done
[[ "$(json_field run <"$tmp/j1")" == "$(json_field run <"$tmp/j2")" ]] || fail "--jobs 1 and 2 report different runs"
[[ "$(json_field schedule <"$tmp/j1")" == "$(json_field schedule <"$tmp/j2")" ]] || fail "--jobs 1 and 2 differ"

# 2d. --trace on explore writes the shrunk failing run's trace
set +e; "$W" explore ring/no-release --runs 20 --trace "$tmp/x.txt" >/dev/null 2>&1; set -e
grep -q "wait" "$tmp/x.txt" || fail "explore --trace wrote no trace"

# 2e. plain accesses: ring/early-release reads a freed slot with
#     plain C++ and checks nothing; the race is reported at the read and at
#     the producer's refill, and its replayed trace holds both accesses at
#     the steps the report names
#     (listed only where the catalogue was compiled with the access
#     instrumentation: not in the asan and tsan presets)
if grep -q '^ring/early-release ' "$tmp/list"; then
  ring_hpp="$(dirname "$0")/../examples/ring.hpp"
  freed_read=$(grep -n "the bug: freed above" "$ring_hpp" | cut -d: -f1)
  refill=$(grep -n "smem.slot\[slot.index()\]\[k\] = ring_word(i, k);" "$ring_hpp" | cut -d: -f1)
  [[ -n "$freed_read" && -n "$refill" ]] || fail "examples/ring.hpp: the early-release lines were not found"
  set +e; "$W" explore ring/early-release --runs 20 --trace "$tmp/race.txt" >"$tmp/out" 2>&1; rc=$?; set -e
  [[ $rc == 1 ]] || fail "ring/early-release: exit $rc, expected 1"
  grep -q "violation race.smem" "$tmp/out" || fail "ring/early-release: no race.smem"
  grep -Eq "ring\.hpp:$freed_read\b" "$tmp/out" || { cat "$tmp/out" >&2; fail "ring/early-release: the report lacks ring.hpp:$freed_read"; }
  grep -Eq "ring\.hpp:$refill\b" "$tmp/out" || { cat "$tmp/out" >&2; fail "ring/early-release: the report lacks ring.hpp:$refill"; }
  vstep=$(sed -n 's/^violation race.smem at step \([0-9]*\)$/\1/p' "$tmp/out")
  ostep=$(sed -n 's/^  other: .* at step \([0-9]*\), .*/\1/p' "$tmp/out")
  for s in "$vstep" "$ostep"; do
    grep -Eq "^ *$s  .*(load|store) shared memory" "$tmp/race.txt" ||
      fail "ring/early-release: the trace has no shared-memory access at step $s"
  done
fi

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
expect_usage "runs" explore ring --runs 0
expect_usage "mma-memo-mib" explore gemm --runs 1 --mma-memo-mib lots
expect_usage "jobs" explore ring --jobs 0
expect_usage "shard 3/2" explore ring --shard 3/2
expect_usage "shard" explore ring --shard x
expect_usage "needs --strategy exhaustive" explore ring --preemptions 2
expect_usage "belongs to" run ring --runs 3
expect_usage "portfolios" run ring --strategy random,pct
expect_usage "seconds" explore ring --seconds -1
expect_usage "schedule" replay ring
expect_usage "schedule" replay ring --schedule 9:abc
expect_usage "version 1" replay ring --schedule 1:b3a2b3
# A deviation at the last choice index allowed, then another: refused (the
# bound check once wrapped around and decoded deviations out of order).
expect_usage "choice index too large" replay ring --schedule 2:1099511627776a18446742974197923844a
expect_usage "unused" replay ring --schedule 2:99999b --items 4 --stages 1
expect_usage "cannot move" replay ring --schedule '2:{99}' --items 64
# a schedule recorded for one configuration, replayed with another
set +e; "$W" explore ring/no-release --stages 2 --items 8 --runs 5 --json >"$tmp/j" 2>/dev/null; set -e
sched=$(json_field schedule <"$tmp/j")
expect_usage "another kernel, configuration" replay ring/no-release --stages 3 --items 8 --schedule "$sched"
expect_usage "conflicts with variant" explore gemm/exit-before-drain --cluster 1 --runs 1
expect_usage "unknown command" frobnicate
# cluster shapes and launch options the hardware cannot take: exit 2 before anything runs
expect_usage "cluster shape 3x1" run gemm --cluster 3 --m 384
expect_usage "cluster shape 3x1 does not fit cta_group 2" run gemm --cta-group 2 --cluster 3 --m 768
expect_usage "cluster-y" run gemm --cluster-y 3
expect_usage "must be a positive multiple of 512" run gemm --cluster 4
expect_usage "max_active_clusters must be 0 (all) or in \[1, num_clusters = 1\]" run gemm --max-active-clusters 2
expect_usage "max-active-clusters x: must be a whole number in \[0, 1024\]" run gemm --max-active-clusters x
expect_usage "ctas_per_sm must be in \[1, 32\]" run ring --ctas-per-sm 33
expect_usage "sm_100 holds at most 64 resident warps" run gemm --ctas-per-sm 16

# 6. the launch options: clusters launched one at a time run clean, and the
# replay command carries the option; a 2x2 cluster explores clean
"$W" explore gemm --clusters 2 --max-active-clusters 1 --runs 5 --json >"$tmp/j" 2>/dev/null ||
  fail "gemm --max-active-clusters 1 found something"
"$W" run gemm/no-accum-release --clusters 2 --max-active-clusters 1 --json >"$tmp/j" 2>/dev/null && fail "no-accum-release ran clean"
python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert "--max-active-clusters 1" in d["replay"], d["replay"]' "$tmp/j" ||
  fail "the replay command lacks --max-active-clusters"
set +e; eval "$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["replay"])' "$tmp/j")" >/dev/null 2>&1; rc=$?; set -e
[[ $rc == 1 ]] || fail "the replay with --max-active-clusters exit $rc, expected 1"
"$W" explore gemm --cluster 2 --cluster-y 2 --n 128 --runs 5 >/dev/null 2>&1 || fail "gemm 2x2 found something"

# 5. a variant that pins a setting reports the setting in effect
set +e; "$W" explore gemm/exit-before-drain --runs 100 --json >"$tmp/j" 2>/dev/null; set -e
python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["options"]["cluster"] == 2, d["options"]; assert "--cluster 2" in d["replay"], d["replay"]' "$tmp/j" ||
  fail "gemm/exit-before-drain does not report its pinned --cluster 2"
# 7. no false green, nothing lost.
# 7a. an exploration never reports on nothing: the time budget starts once
#     the first schedule has run; a shard with no run is refused; PCT's
#     measuring run does not eat the budget of a kernel that fails everywhere
set +e; "$W" explore ring/no-release --seconds 0.0001 --jobs 1 >"$tmp/out" 2>/dev/null; rc=$?; set -e
[[ $rc == 1 ]] || fail "explore ring/no-release --seconds 0.0001: exit $rc, expected 1 (found)"
"$W" explore ring --seconds 0.0001 --jobs 1 >"$tmp/out" 2>/dev/null || fail "explore ring --seconds 0.0001: exit $?"
grep -q "explored [1-9][0-9]* runs\?" "$tmp/out" || fail "a tiny budget explored nothing: $(cat "$tmp/out")"
expect_usage "shard 1/2: this shard holds no run" explore ring --runs 1 --shard 1/2
set +e; "$W" explore gemm/missing-k-block --m 1024 --n 1024 --k 1024 --clusters 8 --seconds 1 --jobs 1 --json \
  >"$tmp/j" 2>/dev/null; rc=$?; set -e
[[ $rc == 1 ]] || fail "gemm/missing-k-block 1024^3 on 8 clusters in 1 s: exit $rc, expected 1"
[[ "$(json_field outcome <"$tmp/j")" == result.mismatch ]] || fail "gemm/missing-k-block: wrong outcome"

# 7b. SIGINT / SIGTERM end an exploration with its report, exit 130 / 143;
#     a failure being shrunk is reported as far as it got, with a replay
#     line that reproduces it and a whole trace. (A non-interactive shell
#     starts background jobs with SIGINT ignored, which wspipe respects:
#     the signals are reset to their defaults first.)
reset_signals='import os, signal, sys
for s in (signal.SIGINT, signal.SIGTERM): signal.signal(s, signal.SIG_DFL)
os.execvp(sys.argv[1], sys.argv[1:])'
wait_for() {  # wait_for FILE PATTERN: up to 20 s
  for _ in $(seq 200); do grep -q "$2" "$1" 2>/dev/null && return 0; sleep 0.1; done
  fail "never saw '$2' in $1"
}
rm -f "$tmp/out" "$tmp/err"  # wait_for must not see an earlier command's words
python3 -c "$reset_signals" "$W" explore ring --seconds 60 --jobs 2 >"$tmp/out" 2>"$tmp/err" &
pid=$!
wait_for "$tmp/err" "runs\?,"
kill -INT $pid
set +e; wait $pid; rc=$?; set -e
[[ $rc == 130 ]] || fail "SIGINT: exit $rc, expected 130"
grep -q "interrupted by SIGINT" "$tmp/out" || fail "SIGINT: no word of it: $(cat "$tmp/out")"
grep -q "explored [1-9][0-9]* runs\?.*interrupted: nothing found" "$tmp/out" || fail "SIGINT: no summary"
mkdir "$tmp/sig"
rm -f "$tmp/out" "$tmp/err"
python3 -c "$reset_signals" "$W" explore gemm/exit-before-drain --runs 100 --jobs 1 --trace "$tmp/sig/t.json" \
  >"$tmp/out" 2>"$tmp/err" &
pid=$!
wait_for "$tmp/err" "shrinking its schedule"
kill -TERM $pid
set +e; wait $pid; rc=$?; set -e
[[ $rc == 143 ]] || fail "SIGTERM while shrinking: exit $rc, expected 143"
grep -q "interrupted by SIGTERM" "$tmp/out" || fail "SIGTERM: no word of it"
grep -q "^shrunk:.*(shrinking interrupted)" "$tmp/out" || fail "SIGTERM: no shrink line: $(cat "$tmp/out")"
[[ "$(ls "$tmp/sig")" == t.json ]] || fail "SIGTERM: the trace directory holds $(ls "$tmp/sig")"
python3 -c 'import json, sys; assert json.load(open(sys.argv[1]))["traceEvents"]' "$tmp/sig/t.json" ||
  fail "SIGTERM: the trace is not whole"
replay=$(sed -n 's/^replay:   //p' "$tmp/out")
set +e; eval "$replay --json" >"$tmp/r" 2>/dev/null; rc=$?; set -e
[[ $rc == 1 && "$(json_field outcome <"$tmp/r")" == async.target-exited ]] ||
  fail "SIGTERM: the printed replay line does not reproduce the failure (exit $rc)"

# 7c. output files: checked before anything runs, written whole, every write
#     error an error (exit 3) with the report printed all the same
start=$SECONDS
expect_usage "the directory /nonexistent does not exist" explore ring --seconds 60 --trace /nonexistent/t.json
(( SECONDS - start < 10 )) || fail "a bad --trace directory was refused only after exploring"
expect_usage "is a directory" run ring --trace "$tmp"
set +e; (cd "$tmp" && "$W" run ring --trace - >/dev/null 2>"$tmp/e"); rc=$?; set -e
[[ $rc == 2 && ! -e "$tmp/-" ]] || fail "--trace -: exit $rc, or it wrote a file named '-'"
set +e; "$W" explore ring/no-release --runs 20 --json --trace /dev/full >"$tmp/j" 2>"$tmp/e"; rc=$?; set -e
[[ $rc == 3 ]] || fail "--trace /dev/full: exit $rc, expected 3"
grep -q "error writing trace file /dev/full" "$tmp/e" || fail "--trace /dev/full: $(cat "$tmp/e")"
[[ "$(json_field outcome <"$tmp/j")" == deadlock ]] || fail "--trace /dev/full: the JSON report was lost"
[[ -c /dev/full ]] || fail "/dev/full is no longer a device"
set +e; "$W" explore ring/no-release --runs 20 --json >/dev/full 2>"$tmp/e"; rc=$?; set -e
[[ $rc == 3 ]] || fail "--json to a full standard output: exit $rc, expected 3"
grep -q "could not be written to standard output" "$tmp/e" || fail "--json to /dev/full: $(cat "$tmp/e")"
set +e; "$W" explore ring --runs 5 >/dev/full 2>/dev/null; rc=$?; set -e
[[ $rc == 3 ]] || fail "a report to a full standard output: exit $rc, expected 3"
echo "an older trace" >"$tmp/old.json"
"$W" explore ring --runs 5 --trace "$tmp/old.json" >"$tmp/out" 2>/dev/null || fail "clean explore with an old trace: exit $?"
[[ ! -e "$tmp/old.json" ]] || fail "a clean exploration left an older trace in place"
grep -q "removed the older $tmp/old.json" "$tmp/out" || fail "the older trace was removed without a word"
ls "$tmp" | grep -q "tmp-" && fail "temporary trace files left behind: $(ls "$tmp")"

# 7d. options misread or ignored are refused (or honoured), one case each
"$W" run gemm --max-active-clusters 0 >/dev/null || fail "--max-active-clusters 0 (all at once, the default): exit $?"
set +e; (cd "$tmp" && "$W" run ring --trace --json >/dev/null 2>"$tmp/e"); rc=$?; set -e
[[ $rc == 2 && ! -e "$tmp/--json" ]] || fail "--trace --json: exit $rc, or it wrote a file named --json"
grep -q -- "--trace needs a value" "$tmp/e" || fail "--trace --json: $(cat "$tmp/e")"
expect_usage "unknown option --bogus" run ring --bogus
"$W" explore --help ring >"$tmp/out" || fail "explore --help ring: exit $?"
grep -q "^usage:" "$tmp/out" || fail "explore --help ring printed no help"
expect_usage "--pct-depth 5: no plain pct in --strategy pct:3" explore ring --strategy pct:3 --pct-depth 5
expect_usage "--strategy belongs to" replay ring --strategy random --schedule 2:
expect_usage "--seed belongs to" replay ring --seed 2 --schedule 2:
expect_usage "--shrink-seconds 3: shrinking is off" explore ring --no-shrink --shrink-seconds 3
expect_usage "--cluster 1 cannot be honoured" run gemm --cta-group 2 --cluster 1
expect_usage "--seconds 0x10: must be a number of seconds" explore ring --seconds 0x10
set +e; "$W" run $'ri\033]0;x\ang' >/dev/null 2>"$tmp/e"; rc=$?; set -e
[[ $rc == 2 ]] || fail "a scenario name with control bytes: exit $rc"
python3 - "$tmp/e" <<'PY' || fail "control bytes from a token reached the terminal: $(cat -v "$tmp/e")"
import sys
err = open(sys.argv[1], "rb").read()
assert not any(b < 0x20 and b != 0x0a for b in err), err
assert b"\\x1b" in err, err
PY

# 7e. run i's seed is mixed from (seed, i): consecutive seeds explore
#     different schedules (with seed + i, the first failure moved down by
#     one per seed: runs 3, 2, 1 for seeds 1, 2, 3); tokens recorded before
#     the change still replay
first=()
for s in 1 2 3; do
  set +e; "$W" explore tmem-coresident/two-step-alloc --strategy random --seed $s --runs 400 --no-shrink --jobs 1 \
    --json >"$tmp/j" 2>/dev/null; set -e
  first+=("$(json_field run <"$tmp/j")")
done
(( first[1] == first[0] - 1 && first[2] == first[1] - 1 )) &&
  fail "seeds 1, 2, 3 repeat each other shifted by one run (first failures ${first[*]})"
set +e; "$W" replay ring/no-release --stages 4 --items 64 --schedule 2:033817b3: >/dev/null 2>&1; rc=$?; set -e
[[ $rc == 1 ]] || fail "a token recorded before the seeds changed no longer replays (exit $rc)"

# 7f. a schedule's check covers every step: one recorded on another
#     configuration or scenario is refused, saying why and what to do, even
#     where the runs differ only at steps where one actor alone can move
#     (the choice-point check of version 2 accepted both pairs below); the
#     program it was recorded on replays it; a version 2 token still
#     replays where it was recorded, and its run prints a version 3 token
set +e; "$W" replay ring/no-release --stages 4 --items 64 --schedule 3: --json >"$tmp/j" 2>/dev/null; rc=$?; set -e
[[ $rc == 1 ]] || fail "ring/no-release under the default schedule: exit $rc, expected 1"
sched=$(json_field schedule <"$tmp/j")
[[ $sched == 6:????????: ]] || fail "the printed schedule is not a checked version 6 token: $sched"
expect_usage "the steps of this run differ from those of the run it was recorded from" \
  replay ring --stages 4 --items 4 --schedule "$sched"
grep -q "another kernel, configuration or wspipe version. Replay it with the kernel and options it was recorded with" \
  "$tmp/e" || fail "the refusal does not say why and what to do: $(cat "$tmp/e")"
set +e; "$W" replay ring/no-release --stages 4 --items 64 --schedule "$sched" >/dev/null 2>&1; rc=$?; set -e
[[ $rc == 1 ]] || fail "$sched does not replay on the program it was recorded on (exit $rc)"
"$W" run ring --stages 2 --items 4 --seed 1 --json >"$tmp/j" 2>/dev/null || fail "run ring --stages 2 --items 4: exit $?"
sched=$(json_field schedule <"$tmp/j")
expect_usage "the steps of this run differ" replay tmem-coresident --schedule "$sched"
"$W" replay ring --stages 2 --items 4 --schedule "$sched" >/dev/null 2>&1 || fail "$sched does not replay on ring"
set +e; "$W" replay ring/no-release --stages 4 --items 64 --schedule 2:033817b3: --json >"$tmp/j" 2>/dev/null; rc=$?; set -e
[[ $rc == 1 && "$(json_field schedule <"$tmp/j")" == 6:????????: ]] ||
  fail "the version 2 token: exit $rc, printed $(json_field schedule <"$tmp/j")"
expect_usage "the choice points of this run differ" replay ring/no-release --stages 2 --items 8 --schedule 2:033817b3:

# 7g. memory and threads are budgets, not crashes (docs/reliability.md): out of
#     memory or unable to start a job's thread, the program says what would
#     help and exits 4 (it was std::bad_alloc / std::system_error, exit 134).
#     The limits: 400 MB of address space, and 2 GB, which fits 100-odd
#     threads' stacks, not 1024.
expect_resources() {
  local limit=$1 what=$2; shift 2
  set +e; (ulimit -v "$limit"; "$W" "$@") >/dev/null 2>"$tmp/e"; rc=$?; set -e
  [[ $rc == 4 ]] || fail "'$*' under ulimit -v $limit: exit $rc, expected 4: $(cat "$tmp/e")"
  grep -qi -- "$what" "$tmp/e" || fail "'$*' message does not name '$what': $(cat "$tmp/e")"
}
# (AddressSanitizer reserves its shadow memory up front: under a limit on
# the address space an ASan build cannot start, so an ASan build skips these.)
if [[ ${WSPIPE_SANITIZE:-} != *address* ]]; then
  expect_resources 400000 "out of memory" run gemm --m 4096 --n 64 --k 64 --cluster 4 --clusters 64
  expect_resources 2000000 "fewer jobs" explore ring --jobs 1024 --runs 2000
  # `run` keeps a trace only where it is used (--trace, or a failing run's
  # report, which replays the run with it): a long clean run fits 400 MB
  # (it held a 646 MB trace it never showed, and aborted under this limit;
  # the race checker's records of accesses and epochs, about 200 bytes an
  # item, are what it holds now).
  set +e; (ulimit -v 400000; "$W" run ring --items 1000000) >/dev/null 2>"$tmp/e"; rc=$?; set -e
  [[ $rc == 0 ]] || fail "run ring --items 1000000 under 400 MB: exit $rc: $(cat "$tmp/e")"
  # With --trace the run streams its trace to the file and holds only its
  # last events (it held all 6 million, 646 MB, and aborted here).
  set +e; (ulimit -v 400000; "$W" run ring --items 1000000 --trace /dev/null) >/dev/null 2>"$tmp/e"; rc=$?; set -e
  [[ $rc == 0 ]] || fail "run ring --items 1000000 --trace /dev/null under 400 MB: exit $rc: $(cat "$tmp/e")"
fi
# A streamed trace file is whole: its last line is the run's last step.
"$W" run ring --items 30000 --trace "$tmp/long.txt" >"$tmp/o"
steps=$(sed -n 's/^status: ok after \([0-9]*\) steps$/\1/p' "$tmp/o")
last=$(tail -n 1 "$tmp/long.txt" | awk '{print $1}')
[[ -n $steps && $last == "$steps" ]] || fail "streamed trace ends at step '$last', the run at '$steps'"
"$W" run ring --items 30000 --trace "$tmp/long.json" >/dev/null
python3 -c 'import json, sys; ev = json.load(open(sys.argv[1]))["traceEvents"]; assert len(ev) > 100000, len(ev)' "$tmp/long.json" ||
  fail "streamed JSON trace is not whole"
rm -f "$tmp/long.txt" "$tmp/long.json"
# --max-memory: a launch that does not fit the budget is
# an error naming what needed the memory and the option, exit 4; the MMA
# memos stay within half of it, so a budget the runs fit in is enough.
set +e; "$W" run gemm --m 4096 --n 64 --k 64 --cluster 4 --clusters 64 --max-memory 64 >/dev/null 2>"$tmp/e"; rc=$?; set -e
[[ $rc == 4 ]] || fail "run gemm over --max-memory 64: exit $rc: $(cat "$tmp/e")"
grep -q "out of memory budget: .* needs .*--max-memory" "$tmp/e" || fail "--max-memory message: $(cat "$tmp/e")"
"$W" explore gemm --m 512 --n 512 --k 256 --clusters 4 --runs 6 --jobs 2 --max-memory 48 >/dev/null 2>"$tmp/e" ||
  fail "explore gemm within --max-memory 48: $(cat "$tmp/e")"
set +e; "$W" explore gemm --m 512 --n 512 --k 256 --clusters 4 --runs 6 --jobs 2 --max-memory 1 >/dev/null 2>"$tmp/e"; rc=$?; set -e
[[ $rc == 4 ]] && grep -q "out of memory budget" "$tmp/e" || fail "explore over --max-memory 1: exit $rc: $(cat "$tmp/e")"
# A failing run's report still shows the events before the deadlock.
set +e; "$W" run ring/no-release --stages 2 --items 8 >"$tmp/o" 2>&1; rc=$?; set -e
[[ $rc == 1 ]] || fail "run ring/no-release: exit $rc"
grep -q "last events on empty\[0\]" "$tmp/o" || fail "run ring/no-release: no event history: $(cat "$tmp/o")"

# A long run's schedule is not printed: the report writes it to a file in
# the current directory, and its replay command, run as printed, reads it.
"$W" run ring --items 20000 >"$tmp/o"
line=$(grep '^schedule: ' "$tmp/o") || fail "long run: no schedule line"
[[ ${#line} -lt 200 ]] || fail "long run printed its whole schedule (${#line} characters)"
file=$(sed -n 's/^schedule: .* characters, in \(.*\))$/\1/p' "$tmp/o")
[[ -n $file && -s $file ]] || fail "long run: schedule file '$file' missing: $line"
replay=$(sed -n 's/^replay:   //p' "$tmp/o")
[[ $replay == *"--schedule @"* && ${#replay} -lt 400 ]] || fail "long run: replay line $replay"
eval "$replay" >"$tmp/r" || fail "long run: replay from the file: exit $?"
grep -q "^status: ok after $(sed -n 's/^status: ok after \([0-9]*\) steps$/\1/p' "$tmp/o") steps$" "$tmp/r" ||
  fail "long run: the replay took other steps: $(head -3 "$tmp/r")"
set +e; "$W" replay ring --items 20000 --schedule @"$tmp/missing.txt" >/dev/null 2>"$tmp/e"; rc=$?; set -e
[[ $rc == 2 ]] && grep -q "cannot read" "$tmp/e" || fail "replay --schedule @missing: exit $rc: $(cat "$tmp/e")"
# a short one is still printed whole
"$W" run ring --items 4 >"$tmp/o"
grep -q '^replay:   .*--schedule [^@]' "$tmp/o" || fail "short run: $(cat "$tmp/o")"

echo "cli end-to-end: ok"
