#!/usr/bin/env bash
# Builds wspipe if needed (installing what is missing), then runs it with
# the given arguments: tools/wspipe.sh explore ring --runs 1000
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
"$root/tools/bootstrap.sh" default
# Failure reports print a replay command; make it name this script, so
# that it can be pasted as printed.
export WSPIPE_PROG="${WSPIPE_PROG:-tools/wspipe.sh}"
exec "$root/build/default/wspipe" "$@"
