#!/usr/bin/env bash
# No tracked file may point outside the repository for what the code relies
# on: the design and hardware notes the project started from, and the
# shared reference folder beside the checkout, are not in it, so a
# maintainer who clones wspipe cannot follow such a reference. The
# hardware rules, the bug catalogue and the programming model are in
# docs/hardware.md, docs/programming-model.md and docs/pipeline-api.md; cite
# those. Prints every offending file:line and fails if there is one.
#
# Usage: tests/no_outside_refs.sh [repository root] (default: this script's
# repository). Needs git: it searches the tracked files of the work tree.
set -euo pipefail
root=${1:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}
cd "$root"
if ! git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  echo "no_outside_refs: $root is not a git work tree; nothing to check" >&2
  exit 77
fi
# The names are spelled in pieces so that this script does not match itself
# (it is excluded anyway).
design='DESIGN''\.md'
hardware='HARDWARE''\.md'
# Also the bare section form ("HARDWARE §5").
pattern="${design}|${hardware}|(DESIGN|HARDWARE) §|\.\./shared|shared/reference/"
if hits=$(git grep -n -I -E "$pattern" -- . ':(exclude)tests/no_outside_refs.sh'); then
  echo "$hits"
  echo "no_outside_refs: $(wc -l <<<"$hits") line(s) above point outside the repository;" \
    "cite docs/hardware.md, docs/programming-model.md or docs/pipeline-api.md instead" >&2
  exit 1
fi
echo "no_outside_refs: no tracked file points outside the repository"
