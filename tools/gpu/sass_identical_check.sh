#!/usr/bin/env bash
# sass_identical_check.sh OBJECT_A OBJECT_B: the two objects hold the same
# SASS, function for function, instruction for instruction (cuobjdump
# -sass, encodings included; anonymous namespaces' hashes aside). CTest runs it on each object built without
# WSPIPE_CUDA_EVENT_LOG and the same source built with
# WSPIPE_CUDA_EVENT_LOG=0, and likewise WSPIPE_CUDA_DELAYS=0: the event log
# and the seeded delays, off, must leave no trace (docs/event-log.md,
# docs/delays.md). Exit 0 identical, 1 different (the first
# differences are printed), 77 (CTest skip) without cuobjdump, as
# sass_check.sh.
set -u
[ "$#" -eq 2 ] || { echo "usage: $0 OBJECT_A OBJECT_B" >&2; exit 2; }
source "$(dirname "${BASH_SOURCE[0]}")/find_cuobjdump.sh"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for side in a b; do
  obj=$1
  shift
  # Anonymous namespaces are named after a hash that nvcc derives per
  # compilation: the only part of a name that may differ.
  "$cuobjdump" -sass "$obj" 2>"$tmp/err" | sed 's/_GLOBAL__N__[0-9a-f]*_/_GLOBAL__N__<hash>_/g' >"$tmp/$side"
  [ "${PIPESTATUS[0]}" -eq 0 ] || { cat "$tmp/err" >&2; exit 1; }
  grep -q nvdisasm "$tmp/err" && { echo "SKIP: cuobjdump cannot run nvdisasm"; exit 77; }
  functions=$(grep -c 'Function :' "$tmp/$side")
  [ "$functions" -gt 0 ] || { echo "sass_identical_check: no functions in $obj" >&2; exit 1; }
  echo "$obj: $functions functions, $(grep -c '/\*[0-9a-f]\{4\}\*/' "$tmp/$side") instructions"
done
if ! cmp -s "$tmp/a" "$tmp/b"; then
  echo "FAIL: the SASS differs:"
  diff "$tmp/a" "$tmp/b" | head -40
  exit 1
fi
echo "sass_identical_check: identical SASS"
